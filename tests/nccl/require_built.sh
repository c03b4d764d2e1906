# shellcheck shell=bash
# require_built TARGET PATH [TARGET PATH ...]: the programs and libraries a test script runs must exist before it runs
# them: a missing one would make the script fail for a reason it does not name (a program that cannot start exits 127,
# which reads as the program's own failure). For each PATH that is not a file, prints "FAIL: PATH does not exist:
# build the CMake target TARGET first" (with the build folder when PATH lies in one); exits 1 when any is missing.
require_built() {
  local missing=0 target path build
  while [ $# -ge 2 ]; do
    target=$1 path=$2
    shift 2
    [ -f "$path" ] && continue
    build=${path%/bin/*}
    [ "$build" = "$path" ] && build=${path%/lib/*}
    if [ "$build" != "$path" ]; then
      echo "FAIL: $path does not exist: build the CMake target $target first (cmake --build $build --target $target)"
    else
      echo "FAIL: $path does not exist: build the CMake target $target first"
    fi
    missing=1
  done
  [ "$missing" = 0 ] || exit 1
}
