#!/usr/bin/env python3
"""Reads one of quaked's summary feeds with the libraries behind Home Assistant's feed
integrations, and prints what each made of it as one JSON object.

    http_geojson_feeds.py URL FEED_TYPE HOME_LAT HOME_LON [RADIUS_KM [MIN_MAGNITUDE]]

- aio_geojson_usgs_earthquakes (Home Assistant's usgs_earthquakes_feed): the library knows only
  the USGS's own URLs, by feed type (past_day_all_earthquakes, ...), so the feed is made for
  FEED_TYPE and then pointed at URL, the one thing that differs;
- aio_geojson_generic_client (Home Assistant's geo_json_events), which takes any URL.

Both fetch URL themselves over aiohttp. Prints
{"usgs": {"status": ..., "entries": [...]}, "generic": {"status": ..., "entries": [...]}}
and exits 0 when both updates returned "OK"; 1 otherwise.
"""

import asyncio
import json
import sys

import aiohttp
from aio_geojson_generic_client import GenericFeed
from aio_geojson_usgs_earthquakes import UsgsEarthquakeHazardsProgramFeed


def iso(value):
    return value.isoformat() if value is not None else None


async def main():
    url, feed_type = sys.argv[1], sys.argv[2]
    home = (float(sys.argv[3]), float(sys.argv[4]))
    radius = float(sys.argv[5]) if len(sys.argv) > 5 else None
    minimum = float(sys.argv[6]) if len(sys.argv) > 6 else None
    async with aiohttp.ClientSession() as session:
        usgs = UsgsEarthquakeHazardsProgramFeed(
            session, home, feed_type, filter_radius=radius, filter_minimum_magnitude=minimum
        )
        usgs._url = url  # the library's URLs are the USGS's; quaked serves the same paths
        usgs_status, usgs_entries = await usgs.update()
        generic = GenericFeed(session, home, url, filter_radius=radius)
        generic_status, generic_entries = await generic.update()
    result = {
        "usgs": {
            "status": usgs_status,
            "lastTimestamp": iso(usgs.last_timestamp),
            "entries": [
                {
                    "id": e.external_id,
                    "title": e.title,
                    "place": e.place,
                    "magnitude": e.magnitude,
                    "time": iso(e.time),
                    "updated": iso(e.updated),
                    "alert": e.alert,
                    "type": e.type,
                    "status": e.status,
                    "coordinates": list(e.coordinates) if e.coordinates else None,
                    "distance": e.distance_to_home,
                    "attribution": e.attribution,
                }
                for e in (usgs_entries or [])
            ],
        },
        "generic": {
            "status": generic_status,
            "entries": [
                {
                    "id": e.external_id,
                    "title": e.title,
                    "coordinates": list(e.coordinates) if e.coordinates else None,
                    "distance": e.distance_to_home,
                    "sources": (e.properties or {}).get("sources"),
                    "ids": (e.properties or {}).get("ids"),
                    "contributors": (e.properties or {}).get("contributors"),
                }
                for e in (generic_entries or [])
            ],
        },
    }
    print(json.dumps(result))
    return 0 if usgs_status == "OK" and generic_status == "OK" else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
