"""How far what a run trains is from the pool in answer (docs/simulator.md, "Session 35"): the total
variation distance between the answer marginal of its part and the pool's (and the same for the
level), and, for a run with `--set log_groups=true`, of its trained groups with reward variance,
over the run and per third, with the answers it favours most.

    python benchmarks/answer_skew.py RUN_DIR [RUN_DIR ...]     # a run: run.json, steps.jsonl
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from rollalloc.tasks import load_task, run_pool


def tv(a: collections.Counter, b: collections.Counter) -> float:
    """Total variation distance between two count tables' distributions."""
    na, nb = sum(a.values()), sum(b.values())
    return 0.5 * sum(abs(a[k] / na - b[k] / nb) for k in set(a) | set(b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    for run in map(Path, ap.parse_args().runs):
        rj = json.loads((run / "run.json").read_text())
        cfg = rj["config"]
        full = load_task(cfg["task"], cfg.get("task_config"), seed=cfg.get("data_seed", 0)).train
        part = run_pool(cfg, rj.get("pool_part")).train
        pool = collections.Counter(full["answer"])
        line = (f"{run}: part {len(part['answer'])} prompts, answer TV "
                f"{tv(collections.Counter(part['answer']), pool):.3f}")  # fmt: skip
        if "level" in full:
            line += f", level TV {tv(collections.Counter(part['level']), collections.Counter(full['level'])):.3f}"
        steps = [json.loads(x) for x in (run / "steps.jsonl").read_text().splitlines() if x]
        ans = part["answer"]
        rows = [(st["step"], ans[p]) for st in steps if "trained" in st
                for p, v in zip(st["trained"]["prompt_ids"], st["trained"]["varies"]) if v]  # fmt: skip
        if rows:
            last = max(s for s, _ in rows) + 1
            thirds = [collections.Counter(a for s, a in rows if k * last / 3 <= s < (k + 1) * last / 3)
                      for k in range(3)]  # fmt: skip
            trained = collections.Counter(a for _, a in rows)
            n, big = len(rows), len(full["answer"])
            ratio = sorted(
                ((trained[a] / n) / (pool[a] / big), a) for a in pool if pool[a] / big > 0.01
            )
            line += (f"; trained groups with variance {n}: answer TV {tv(trained, pool):.3f}, thirds "
                     + " / ".join(f"{tv(c, pool):.3f}" for c in thirds)
                     + f"; most favoured {[(a, round(r, 2)) for r, a in ratio[-4:]]}, least "
                     f"{[(a, round(r, 2)) for r, a in ratio[:3]]}")  # fmt: skip
        print(line)


if __name__ == "__main__":
    main()
