"""Where the minutes of a test run went: ``S04_TEST_TIMELINE=<file> make test``, then
``python benchmarks/timeline.py <file>``.

Prints each xdist worker's busy time and idle gaps, the run's span, the tests still running in its last
minutes (the tail that decides the wall time) and the longest tests. Wall-clock seconds of a run that shares
its cores: they say what overlapped, not what a test costs alone.
"""

from __future__ import annotations

import sys
from pathlib import Path


def read(path: Path) -> list[tuple[str, float, float, str, float]]:
    """``(worker, start, end, node id, CPU seconds)`` per test, by start; CPU is NaN in a file written before
    the timeline had that column."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        worker, start, end, nodeid, *cpu = line.split("\t")
        rows.append((worker, float(start), float(end), nodeid, float(cpu[0]) if cpu else float("nan")))
    return sorted(rows, key=lambda r: r[1])


def main(path: Path, gap_s: float = 20.0, tail_s: float = 120.0) -> None:
    rows = read(path)
    begin, finish = min(r[1] for r in rows), max(r[2] for r in rows)
    print(f"{len(rows)} tests, span {finish - begin:.0f} s")
    for worker in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == worker]
        busy = sum(end - start for _, start, end, *_ in mine)
        gaps = [(mine[i][2], mine[i + 1][1]) for i in range(len(mine) - 1) if mine[i + 1][1] - mine[i][2] > gap_s]
        print(
            f"{worker}: busy {busy:.0f} s, first start +{mine[0][1] - begin:.0f} s, last end +{mine[-1][2] - begin:.0f} s"
        )
        for a, b in gaps:
            print(f"    idle {b - a:.0f} s from +{a - begin:.0f} s")
    print(f"running in the last {tail_s:.0f} s:")
    for worker, start, end, nodeid, _ in rows:
        if end > finish - tail_s:
            print(f"    {worker} +{start - begin:.0f}..+{end - begin:.0f} s {nodeid}")
    print("longest (wall s, CPU s):")
    for worker, start, end, nodeid, cpu in sorted(rows, key=lambda r: r[1] - r[2])[:15]:
        print(f"    {end - start:7.1f} s {cpu:7.1f} s {worker} {nodeid}")
    by_module: dict[str, float] = {}
    for *_, nodeid, cpu in rows:
        module = nodeid.split("::")[0]
        by_module[module] = by_module.get(module, 0.0) + cpu
    print("CPU by module (this process and the children it waited for):")
    for module, cpu in sorted(by_module.items(), key=lambda kv: -kv[1])[:20]:
        print(f"    {cpu:7.1f} s {module}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
