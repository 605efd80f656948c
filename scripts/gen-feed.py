#!/usr/bin/env python3
"""Write a synthetic USGS GeoJSON summary feed of any size, built from real features.

Usage: gen-feed.py --features N [--seed S] [--templates DIR] [--shift-updated K] OUT

Each output feature is a real feature from the fixture feeds (templates) with a new,
unique id/code, a new time and a jittered magnitude, so the output has the real
shape and field mix of the USGS feed at any scale. The same arguments always give
the same bytes. --shift-updated K bumps `updated` (and `mag`) on every K-th feature,
which makes a second feed that differs from the first in a known number of events.
"""
import argparse, glob, json, os, random, sys

here = os.path.dirname(os.path.abspath(__file__))
default_templates = os.path.join(here, "..", "Tests", "Fixtures", "usgs")

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--features", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--templates", default=default_templates)
    p.add_argument("--shift-updated", type=int, default=0)
    p.add_argument("out")
    a = p.parse_args()
    templates = []
    for path in sorted(glob.glob(os.path.join(a.templates, "*.geojson"))):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        templates.extend(ft for ft in doc.get("features", []) if isinstance(ft, dict))
    if not templates:
        sys.exit("no template features found in " + a.templates)
    rng = random.Random(a.seed)
    generated = 1_700_000_000_000
    with open(a.out, "w", encoding="utf-8") as out:
        out.write('{"type":"FeatureCollection","metadata":{"generated":%d,'
                  '"url":"https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/all_month.geojson",'
                  '"title":"USGS All Earthquakes, Past Month","status":200,"api":"1.10.3","count":%d},"features":['
                  % (generated, a.features))
        for i in range(a.features):
            ft = json.loads(json.dumps(rng.choice(templates)))
            props = ft.setdefault("properties", {}) or {}
            net = (props.get("net") or "xx")[:2]
            code = "g%08d" % i
            ft["id"] = net + code
            props["net"], props["code"] = net, code
            props["ids"] = ",%s," % ft["id"]
            t = generated - rng.randrange(0, 2_592_000_000)
            props["time"] = t
            props["updated"] = t + rng.randrange(0, 3_600_000)
            if isinstance(props.get("mag"), (int, float)):
                props["mag"] = round(props["mag"] + rng.uniform(-0.3, 0.3), 2)
            if a.shift_updated and i % a.shift_updated == 0:
                props["updated"] += 60_000
                if isinstance(props.get("mag"), (int, float)):
                    props["mag"] = round(props["mag"] + 0.1, 2)
            props["url"] = "https://earthquake.usgs.gov/earthquakes/eventpage/" + ft["id"]
            props["detail"] = "https://earthquake.usgs.gov/earthquakes/feed/v1.0/detail/%s.geojson" % ft["id"]
            if i:
                out.write(",")
            out.write(json.dumps(ft, ensure_ascii=False, separators=(",", ":")))
        out.write('],"bbox":[-180,-90,-10,180,90,700]}\n')

if __name__ == "__main__":
    main()
