#!/usr/bin/env python3
"""Merge the shards of a graded directory (grade.sbatch) into one JSONL file.

    python3 deploy/slurm/merge.py SUBMISSIONS_DIR RESULTS_DIR

Checks that every *.R file of SUBMISSIONS_DIR has exactly one result across the shards,
writes RESULTS_DIR/results.jsonl (sorted by file), and prints one summary line: files,
outcomes, missing, duplicated, and the worst exit status. Exits with the worst status
(as `rsandbox run` does for one machine) when the results are complete, else 65.
"""
import collections
import glob
import json
import os
import sys

INCOMPLETE = 65


def main(submissions, results):
    expected = sorted(
        name for name in os.listdir(submissions)
        if os.path.isfile(os.path.join(submissions, name)) and name.endswith((".R", ".r"))
    )
    seen = collections.defaultdict(list)
    for shard in sorted(glob.glob(os.path.join(results, "shard-*-of-*.jsonl"))):
        with open(shard, encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                seen[os.path.basename(record["file"])].append(record)
    missing = [name for name in expected if name not in seen]
    duplicated = sorted(name for name, records in seen.items() if len(records) > 1)
    unexpected = sorted(set(seen) - set(expected))
    outcomes = collections.Counter(
        records[0].get("outcome", "not_run") for records in seen.values()
    )
    worst = max((records[0]["exit_status"] for records in seen.values()), default=0)
    with open(os.path.join(results, "results.jsonl"), "w", encoding="utf-8") as out:
        for name in sorted(seen):
            out.write(json.dumps(seen[name][0], sort_keys=True) + "\n")
    complete = not (missing or duplicated or unexpected)
    print(json.dumps({
        "files": len(expected), "results": sum(len(r) for r in seen.values()),
        "outcomes": dict(sorted(outcomes.items())), "missing": missing[:20],
        "missing_count": len(missing), "duplicated": duplicated[:20], "unexpected": unexpected[:20],
        "worst_exit_status": worst, "complete": complete,
    }))
    return worst if complete else INCOMPLETE


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
