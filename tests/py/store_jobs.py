"""Prints the rows of kiln serve's job store (--database, default <user-dir>/kiln-jobs.sqlite, src/server/job_store.c) as JSON:
{id: {"state": name, "attempts": claims QUEUED -> RUNNING so far, "finished_ms": ...}}. Read with Python's
sqlite3 (the real SQLite library), so a test can count the store's transitions, not only what /history shows.

usage: store_jobs.py DB_PATH [OUT_JSON]   (stdout when OUT_JSON is absent)
"""
import json
import os
import sqlite3
import sys

STATES = ["queued", "running", "succeeded", "failed", "cancelled", "interrupted"]  # kiln_job_state order


def read(path):
    if not os.path.exists(path):
        sys.exit(f"FAIL: no job store at {path}")
    # read-write (nothing is written): a read-only connection cannot always use the WAL a killed server left
    db = sqlite3.connect(path, timeout=10)
    try:
        rows = db.execute("SELECT id, state, attempts, finished_ms FROM jobs").fetchall()
    finally:
        db.close()
    return {i: {"state": STATES[s] if 0 <= s < len(STATES) else str(s), "attempts": a, "finished_ms": f}
            for i, s, a, f in rows}


if __name__ == "__main__":
    text = json.dumps(read(sys.argv[1]), sort_keys=True)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(text)
    else:
        print(text)
