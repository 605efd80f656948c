#!/usr/bin/env python3
"""The benchmark's plain peer: Python's json.load plus sqlite3 executemany upsert.

Usage: peer_import.py FEED DB

Loads the whole document, then upserts every feature into a table equivalent to quaked's
`quakes` table (same columns, same indexes, WAL) in one transaction. Prints one JSON line.
"""
import json, sqlite3, sys, time

COLUMNS = ["id", "mag", "place", "time", "updated", "tz", "url", "detail", "felt", "cdi", "mmi", "alert",
           "status", "tsunami", "sig", "net", "code", "ids", "sources", "types", "nst", "dmin", "rms", "gap",
           "magType", "type", "title", "lon", "lat", "depth"]

def main():
    feed, db_path = sys.argv[1], sys.argv[2]
    start = time.monotonic()
    with open(feed, encoding="utf-8") as f:
        doc = json.load(f)
    db = sqlite3.connect(db_path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS quakes (id TEXT PRIMARY KEY NOT NULL, mag REAL, place TEXT, "
               "time INTEGER NOT NULL, updated INTEGER, tz INTEGER, url TEXT, detail TEXT, felt INTEGER, cdi REAL, "
               "mmi REAL, alert TEXT, status TEXT, tsunami INTEGER, sig INTEGER, net TEXT, code TEXT, ids TEXT, "
               "sources TEXT, types TEXT, nst INTEGER, dmin REAL, rms REAL, gap REAL, magType TEXT, type TEXT, "
               "title TEXT, lon REAL, lat REAL, depth REAL)")
    db.execute("CREATE INDEX IF NOT EXISTS quakes_time ON quakes (time DESC)")
    db.execute("CREATE INDEX IF NOT EXISTS quakes_mag ON quakes (mag DESC)")
    rows = []
    for ft in doc["features"]:
        p = ft.get("properties") or {}
        c = (ft.get("geometry") or {}).get("coordinates") or [None, None, None]
        status = p.get("status")
        rows.append((ft["id"], p.get("mag"), p.get("place"), p["time"], p.get("updated"), p.get("tz"),
                     p.get("url"), p.get("detail"), p.get("felt"), p.get("cdi"), p.get("mmi"), p.get("alert"),
                     status.lower() if isinstance(status, str) else status, p.get("tsunami"), p.get("sig"),
                     p.get("net"), p.get("code"), p.get("ids"), p.get("sources"), p.get("types"), p.get("nst"),
                     p.get("dmin"), p.get("rms"), p.get("gap"), p.get("magType"), p.get("type"), p.get("title"),
                     c[0], c[1], c[2] if len(c) > 2 else None))
    placeholders = ",".join("?" * len(COLUMNS))
    updates = ",".join(f"{c}=excluded.{c}" for c in COLUMNS[1:])
    with db:
        db.executemany(f"INSERT INTO quakes ({','.join(COLUMNS)}) VALUES ({placeholders}) "
                       f"ON CONFLICT(id) DO UPDATE SET {updates} WHERE excluded.updated >= quakes.updated", rows)
    count = db.execute("SELECT count(*) FROM quakes").fetchone()[0]
    db.close()
    print(json.dumps({"features": len(doc["features"]), "stored": count,
                      "seconds": time.monotonic() - start}))

if __name__ == "__main__":
    main()
