// Fuzzes the reading of `--region FILE.geojson` (QuakeFeed's GeoJSONRegion, then
// PolygonRegion's validation and point test) over arbitrary bytes. It must never crash or
// hang, and what it accepts must keep PolygonRegion's promises:
// - a valid region survives its own coding (what quakectl sends quaked) unchanged;
// - points on an edge are inside: every vertex of a polygon without holes is contained;
// - the answer for a point does not change when asked again.

import Foundation
import FuzzSupport
import QuakeFeed

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzGeoJSONRegion(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = bytes(start, count)
    guard let region = try? GeoJSONRegion.parse(Data(input)) else { return 0 }
    guard (try? region.validate()) != nil else { return 0 }
    if let coded = try? JSONEncoder().encode(region) {
        let decoded = try? JSONDecoder().decode(PolygonRegion.self, from: coded)
        check(decoded == region, "the region of \(show(input)) does not survive its coding")
    } else {
        fail("a valid region of \(show(input)) cannot be encoded")
    }
    var choices = Choices(seed: input)
    for polygon in region.polygons {
        for (index, point) in polygon[0].enumerated() where polygon.count == 1 {
            check(
                region.contains(lat: point.lat, lon: point.lon),
                "vertex \(index) (\(point.lat), \(point.lon)) of a polygon without holes is not inside: \(show(input))")
        }
        // Points about the first ring: the answer is stable.
        guard let first = polygon[0].first else { continue }
        for _ in 0..<4 {
            let lat = max(-90, min(90, first.lat + Double(choices.next(in: 0...200)) / 10 - 10))
            let lon = first.lon + Double(choices.next(in: 0...200)) / 10 - 10
            let answer = region.contains(lat: lat, lon: lon)
            check(answer == region.contains(lat: lat, lon: lon), "contains(\(lat), \(lon)) changed: \(show(input))")
        }
    }
    return 0
}

runFuzzer(fuzzGeoJSONRegion)
