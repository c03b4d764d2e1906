#!/usr/bin/env python3
"""Checks Braid's dependency rule on every #include of the library, CLI and benchmark sources.

The layers, bottom to top (ARCHITECTURE.md §2; each folder's README says the same):

  common < topology < ir < algos < cost < {synthesizer, runtime < comm < nccl} < pareto < nccl_pareto < report
  < {cli, perf}

synthesizer sits beside runtime and comm: neither side includes the other (they meet at the IR); nccl is
runtime/nccl, the plugins NCCL loads and the NCCL-API shim (they use the cost model, the runtime and the
communicator's selection, never the synthesizer); pareto
(comm/pareto, synthesizing a Pareto set at communicator init) is the first layer above both. nccl_pareto is
runtime/nccl/shim/pareto, the shim's companion library libbraid_nccl_pareto.so (the Pareto set for BRAID_TOPOLOGY,
dlopened by the shim only when needed): the one part of runtime/nccl that may use pareto and so the synthesizer.
report is cli/report (braid_report), shared by the CLI and the benchmarks. Two rules:

1. Direction. A file may include a public header (include/braid/*.h) only of its own layer or one below it.
   Every public header belongs to one layer (PUBLIC_HEADERS below); a public header missing from that table is
   an error, so a new one gets a layer when it is written.
2. Privacy. A header outside include/braid is private to the folder it lives in: only files in that folder (or
   below it) include it. The exceptions are the folders meant to be shared inside the core (SHARED_PRIVATE).

Tests (tests/) may include the private headers of the layer they test and are not checked.

Usage: scripts/check-layers.py [--root DIR] [FILE ...]   (files relative to DIR; default: every source under
the checked folders). Prints "file:line: message" for each offending include and exits 1 when there is one.
"""

import argparse
import os
import re
import sys

ORDER = [
    "common", "topology", "ir", "algos", "cost", "synthesizer", "runtime", "comm", "nccl", "pareto", "nccl_pareto",
    "report", "cli", "perf"
]
RANK = {name: i for i, name in enumerate(ORDER)}
# Pairs of layers that sit side by side: neither may include the other.
SIDE_BY_SIDE = {
    frozenset(("synthesizer", "runtime")),
    frozenset(("synthesizer", "comm")),  # the communicator runs algorithms; synthesizing them at init is pareto's
    frozenset(("cli", "perf")),
    frozenset(("synthesizer", "nccl")),  # the plugins NCCL loads never bring in the solver
    frozenset(("nccl", "pareto")),
}

LAYERS_TEXT = ("common < topology < ir < algos < cost < {synthesizer | runtime < comm < nccl} < pareto < nccl_pareto < "
               "report < {cli | perf}")

# Source folder -> layer (longest prefix wins).
FOLDERS = {
    "src/common": "common",
    "src/topology": "topology",
    "src/ir": "ir",
    "src/algos": "algos",
    "src/cost": "cost",
    "synthesizer": "synthesizer",
    "runtime": "runtime",
    "runtime/nccl": "nccl",
    "runtime/nccl/shim/pareto": "nccl_pareto",
    "comm/pareto": "pareto",
    "comm": "comm",
    "cli/report": "report",
    "cli": "cli",
    "perf": "perf",
}

PUBLIC_HEADERS = {
    "status.h": "common",
    "file_io.h": "common",
    "topology.h": "topology",
    "taccl.h": "topology",
    "importers.h": "topology",
    "collective.h": "ir",
    "algorithm.h": "ir",
    "classic.h": "algos",
    "classic_blocks.h": "algos",
    "program_builder.h": "algos",
    "bounds.h": "cost",
    "nccl_model.h": "cost",
    "nccl_runs.h": "cost",
    "sim_accuracy.h": "cost",
    "nccl_tests_log.h": "cost",
    "sketch.h": "synthesizer",
    "synthesize.h": "synthesizer",
    "datatype.h": "runtime",
    "congestion.h": "runtime",
    "plan.h": "runtime",
    "executor.h": "runtime",
    "transport.h": "runtime",
    "transports.h": "runtime",
    "bootstrap.h": "runtime",
    "simulate.h": "runtime",
    "cuda.h": "runtime",
    "comm.h": "comm",
    "braid.h": "comm",
    "moe.h": "comm",
    "braid_moe.h": "comm",
    "pareto.h": "pareto",
}

# Private folders whose headers other folders may include: folder -> folders allowed (prefixes).
SHARED_PRIVATE = {
    "src/common": [""],  # the bottom layer's helpers (env registry, logger, text, file io): everyone
    "runtime/socket": ["runtime"],  # sockets for the bootstrap and the TCP transport
    "runtime/ucx": ["runtime"],  # ucp context creation for the UCX transport and the net plugin's UCX data path
    "runtime/congestion": ["runtime"],  # chunking and congestion control of the TCP transport and the net plugin
    "runtime/cuda": ["runtime/transport/cuda", "perf"],  # the kernels, for the CUDA transport and their benchmark
    "cli/report": ["cli", "perf"],  # braid_report: the report code of the CLI and the benchmarks
    "comm/pareto": ["report", "cli", "perf"],  # braid_pareto's comparison with NCCL and the bounds (compare.h)
    "perf/calibration": ["perf"],  # braid_calibration
    "runtime/nccl/tuner": ["cli"],  # the NCCL tuner's table builder and rules format, for `braid tune`
    "runtime/nccl/abi": ["perf"],  # NCCL's plugin structs, for benchmarks that load the plugins as NCCL does
    "comm": ["runtime/nccl/shim"],  # the communicator's AlgorithmCatalog (selection.h), the NCCL-API shim's matcher
}

# Where "a/b.h" is looked for, in order (the include directories the targets use).
INCLUDE_ROOTS = ["include", "src", "runtime", "cli", "perf", ""]
CHECKED = ["include/braid", "src", "synthesizer", "runtime", "comm", "cli", "perf"]
SOURCE_EXT = (".h", ".cc", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(path):
    best = None
    for folder, layer in FOLDERS.items():
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best[0]):
                best = (folder, layer)
    return best[1] if best else None


def below_or_same(lower, upper):
    if frozenset((lower, upper)) in SIDE_BY_SIDE:
        return False
    return RANK[lower] <= RANK[upper]


def resolve(root, including, name, quoted):
    candidates = []
    if quoted:
        candidates.append(os.path.normpath(os.path.join(os.path.dirname(including), name)))
    for r in INCLUDE_ROOTS:
        candidates.append(os.path.normpath(os.path.join(r, name)))
    for c in candidates:
        if os.path.isfile(os.path.join(root, c)):
            return c
    return None


def may_include_private(including, header):
    folder = os.path.dirname(header)
    if including.startswith(folder + "/"):
        return True
    for shared, allowed in SHARED_PRIVATE.items():
        if folder == shared or folder.startswith(shared + "/"):
            return any(a == "" or including == a or including.startswith(a + "/") for a in allowed)
    return False


def check_file(root, path, problems):
    layer = "common" if path.startswith("include/braid/") else layer_of(path)
    if path.startswith("include/braid/"):
        layer = PUBLIC_HEADERS.get(os.path.basename(path))
        if layer is None:
            problems.append(f"{path}:1: public header without a layer: add it to PUBLIC_HEADERS in "
                            "scripts/check-layers.py")
            return
    if layer is None:
        return
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            quoted, name = m.group(1) == '"', m.group(2)
            if not quoted and not name.startswith("braid/"):
                continue  # system and third-party headers
            header = resolve(root, path, name, quoted)
            if header is None:
                if name.startswith("braid/"):
                    problems.append(f"{path}:{lineno}: #include \"{name}\": no such public header")
                continue
            if header.startswith("include/braid/"):
                owner = PUBLIC_HEADERS.get(os.path.basename(header))
                if owner is None:
                    problems.append(f"{path}:{lineno}: #include \"{name}\": public header without a layer")
                elif not below_or_same(owner, layer):
                    problems.append(f"{path}:{lineno}: #include \"{name}\": {layer} may not include {owner} "
                                    f"(layers, bottom to top: {LAYERS_TEXT})")
                continue
            if not any(header == c or header.startswith(c + "/") for c in CHECKED) and not header.startswith(
                    "comm/"):
                continue  # generated or third-party
            if not may_include_private(path, header):
                problems.append(f"{path}:{lineno}: #include \"{name}\": {header} is private to "
                                f"{os.path.dirname(header)}/")
                continue
            owner = layer_of(header)
            if owner is not None and not below_or_same(owner, layer):
                problems.append(f"{path}:{lineno}: #include \"{name}\": {layer} may not include {owner}")


def all_sources(root):
    out = []
    for top in CHECKED + ["comm"]:
        base = os.path.join(root, top)
        for dirpath, _, files in os.walk(base):
            for f in files:
                if f.endswith(SOURCE_EXT):
                    out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(set(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    root = os.path.normpath(args.root)
    files = args.files or all_sources(root)
    problems = []
    for path in files:
        check_file(root, os.path.normpath(path), problems)
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: {len(problems)} include(s) break the dependency rule", file=sys.stderr)
        return 1
    print(f"check-layers: {len(files)} files follow the dependency rule")
    return 0


if __name__ == "__main__":
    sys.exit(main())
