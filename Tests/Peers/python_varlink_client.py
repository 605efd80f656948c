"""Calls every io.quaked method through the Python varlink package (an independent Varlink
implementation), and prints one JSON line: {"ok": [...], "errors": [...], "seen": {...}}.

    python3 python_varlink_client.py unix:/path/to/socket

Exit status 0 only when every call behaved: replies arrived and had the declared shape the
Python library builds from the interface description it fetched from quaked.
"""
import json
import sys

import varlink

address = sys.argv[1]
ok, errors, seen = [], [], {}


def check(name, fn):
    try:
        fn()
        ok.append(name)
    except Exception as e:  # noqa: BLE001 - every failure is reported, none is fatal here
        errors.append("%s: %r" % (name, e))


with varlink.Client(address=address) as client:
    with client.open("io.quaked", namespaced=False) as quaked:

        def status():
            s = quaked.GetStatus()
            assert len(s["storeId"]) == 36 and s["headToken"] >= 1, s
            seen["headToken"] = s["headToken"]
            seen["storeId"] = s["storeId"]

        def refresh():
            r = quaked.Refresh()
            assert r["results"][0]["result"] in ("imported", "notModified", "failed"), r

        def history():
            after, transactions, kinds = 0, 0, {}
            while True:
                page = quaked.FetchHistory(after=after, limit=50, storeId=seen["storeId"])
                for t in page["transactions"]:
                    transactions += 1
                    for c in t["changes"]:
                        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
                        for f in c.get("fields") or []:
                            for side in ("old", "new"):
                                v = f.get(side)
                                if v is not None:
                                    assert isinstance(v, dict) and len(v) == 1, f
                after = page["nextAfter"]
                if not page["hasMore"]:
                    break
            seen["transactions"] = transactions
            seen["changes"] = kinds

        def history_streamed():
            # Called with more: the same transactions, page after page, in one call.
            transactions, pages, last = 0, 0, None
            for page in quaked.FetchHistory(after=0, limit=50, storeId=seen["storeId"], _more=True):
                pages += 1
                transactions += len(page["transactions"])
                last = page
            assert last is not None and not last["hasMore"], last
            assert transactions == seen["transactions"], (transactions, seen["transactions"])
            seen["streamedPages"] = pages

        def acknowledge():
            quaked.Acknowledge(client="python-peer", token=seen["headToken"])

        def snapshot():
            quakes, pages = [], 0
            for page in quaked.Snapshot(pageSize=40, _more=True):
                pages += 1
                quakes += page["quakes"]
            assert all("id" in q and "time" in q for q in quakes)
            seen["quakes"] = len(quakes)
            seen["snapshotPages"] = pages
            seen["someId"] = quakes[0]["id"]

        def query():
            r = quaked.Query(
                minMagnitude=1.0, since=0, type="earthquake", limit=5, order="magnitude",
                near={"lat": 0.0, "lon": 0.0, "radiusKm": 20000.0})
            mags = [q.get("mag") for q in r["quakes"]]
            assert mags == sorted(mags, reverse=True), mags
            assert r["total"] >= len(r["quakes"])

        def get():
            assert quaked.Get(id=seen["someId"])["quake"]["id"] == seen["someId"]

        def get_unknown():
            try:
                quaked.Get(id="python-peer-no-such-quake")
            except varlink.VarlinkError as e:
                assert e.error() == "io.quaked.NoSuchQuake", e.error()
                assert e.parameters()["id"] == "python-peer-no-such-quake"
                return
            raise AssertionError("no error")

        def get_reports():
            reports = quaked.GetReports(id=seen["someId"])["reports"]
            assert isinstance(reports, list), reports
            assert all(r["preferred"] == (i == 0) for i, r in enumerate(reports)), reports

        def get_reports_unknown():
            try:
                quaked.GetReports(id="python-peer-no-such-quake")
            except varlink.VarlinkError as e:
                assert e.error() == "io.quaked.NoSuchQuake", e.error()
                assert e.parameters()["id"] == "python-peer-no-such-quake"
                return
            raise AssertionError("no error")

        def delete():
            try:
                r = quaked.Delete(ids=["python-peer-no-such-quake"])
                assert r["notFound"] == ["python-peer-no-such-quake"] and r["deleted"] == [], r
            except varlink.VarlinkError as e:
                assert e.error() == "org.varlink.service.PermissionDenied", e.error()

        def reload():
            try:
                quaked.Reload()
            except varlink.VarlinkError as e:
                assert e.error() == "org.varlink.service.PermissionDenied", e.error()

        def metrics():
            text = quaked.Metrics()["text"]
            assert "# TYPE quaked_history_head_token gauge" in text, text[:200]

        def backfill():
            # A job on a catalog nothing listens on: created queued or running, then cancelled.
            try:
                job = quaked.Backfill(start=1546300800000, end=1546387200000, minMagnitude=4.5,
                                      box={"minLat": 30, "maxLat": 40, "minLon": 170, "maxLon": -170},
                                      catalog="http://127.0.0.1:9/fdsnws/event/1/")["job"]
            except varlink.VarlinkError as e:
                assert e.error() == "org.varlink.service.PermissionDenied", e.error()
                return
            assert job["state"] in ("queued", "running") and job["catalog"].endswith("/fdsnws/event/1/"), job
            assert job["box"]["minLon"] == 170 and job["minMagnitude"] == 4.5, job
            seen["backfillId"] = job["id"]

        def backfill_status():
            jobs = quaked.BackfillStatus()["jobs"]
            if "backfillId" in seen:
                assert jobs[0]["id"] == seen["backfillId"], jobs
            one = quaked.BackfillStatus(id=seen.get("backfillId", 1))
            assert len(one["jobs"]) <= 1, one

        def backfill_unknown():
            try:
                quaked.BackfillStatus(id=987654)
            except varlink.VarlinkError as e:
                assert e.error() == "io.quaked.NoSuchBackfill", e.error()
                assert e.parameters()["id"] == 987654
                return
            raise AssertionError("no error")

        def backfill_cancel():
            try:
                job = quaked.BackfillCancel(id=seen.get("backfillId", 1))["job"]
            except varlink.VarlinkError as e:
                assert e.error() in ("org.varlink.service.PermissionDenied", "io.quaked.NoSuchBackfill"), e.error()
                return
            assert job["state"] == "cancelled" and job["finishedAt"] is not None, job

        for name, fn in [("GetStatus", status), ("Refresh", refresh), ("FetchHistory", history),
                         ("FetchHistory:more", history_streamed),
                         ("Acknowledge", acknowledge), ("Snapshot", snapshot), ("Query", query), ("Get", get),
                         ("Get:NoSuchQuake", get_unknown), ("GetReports", get_reports),
                         ("GetReports:NoSuchQuake", get_reports_unknown), ("Delete", delete), ("Reload", reload),
                         ("Metrics", metrics), ("Backfill", backfill), ("BackfillStatus", backfill_status),
                         ("BackfillStatus:NoSuchBackfill", backfill_unknown), ("BackfillCancel", backfill_cancel)]:
            check(name, fn)

    # Subscribe streams until the caller goes away: its own connection.
    def subscribe():
        with client.open("io.quaked", namespaced=False) as stream:
            first = next(iter(stream.Subscribe(heartbeatSeconds=1, _more=True)))
            assert first["event"] == "subscribed" and first["storeId"] == seen["storeId"], first

    check("Subscribe", subscribe)

print(json.dumps({"ok": ok, "errors": errors, "seen": seen}, sort_keys=True))
sys.exit(1 if errors else 0)
