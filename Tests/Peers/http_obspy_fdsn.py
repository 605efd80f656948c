#!/usr/bin/env python3
"""Runs ObsPy's FDSN client against quaked's event service and prints what it read, as one
JSON object.

    http_obspy_fdsn.py BASE_URL '{"starttime": "2020-01-01T00:00:00", "minmagnitude": 4, ...}'

BASE_URL is the server's root (http://127.0.0.1:PORT): ObsPy finds /fdsnws/event/1/ under it,
reads application.wadl to learn the parameters, and get_events reads the QuakeML answer with
obspy.read_events. Times in the parameters are given as text and passed as UTCDateTime.

Prints {"services": [...], "events": [{"id", "time", "latitude", "longitude", "depth",
"magnitude", "magnitudeType", "agency", "type", "description"}, ...]}, or {"nodata": true}
when ObsPy raised FDSNNoDataException (a 204), or {"badRequest": TEXT} for
FDSNBadRequestException; exits 0 in those cases, 1 on any other error.
"""

import json
import sys

from obspy import UTCDateTime
from obspy.clients.fdsn import Client
from obspy.clients.fdsn.header import FDSNBadRequestException, FDSNNoDataException


def main():
    base_url = sys.argv[1]
    parameters = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    for name in ("starttime", "endtime", "updatedafter"):
        if name in parameters:
            parameters[name] = UTCDateTime(parameters[name])
    client = Client(base_url=base_url, timeout=60)
    services = sorted(client.services.keys())
    try:
        catalog = client.get_events(**parameters)
    except FDSNNoDataException:
        print(json.dumps({"services": services, "nodata": True}))
        return 0
    except FDSNBadRequestException as error:
        print(json.dumps({"services": services, "badRequest": str(error)}))
        return 0
    events = []
    for event in catalog:
        origin = event.preferred_origin() or (event.origins[0] if event.origins else None)
        magnitude = event.preferred_magnitude() or (event.magnitudes[0] if event.magnitudes else None)
        events.append(
            {
                "id": str(event.resource_id),
                "time": str(origin.time) if origin else None,
                "timestamp": origin.time.timestamp if origin else None,
                "latitude": origin.latitude if origin else None,
                "longitude": origin.longitude if origin else None,
                "depth": origin.depth if origin else None,
                "magnitude": magnitude.mag if magnitude else None,
                "magnitudeType": magnitude.magnitude_type if magnitude else None,
                "agency": event.creation_info.agency_id if event.creation_info else None,
                "type": event.event_type,
                "description": event.event_descriptions[0].text if event.event_descriptions else None,
            }
        )
    print(json.dumps({"services": services, "events": events}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
