/// A region of an FDSN event query: a circle (great-circle radius) or a latitude/longitude box,
/// which crosses the antimeridian when `minLon > maxLon`. A backfill job's and a source's region
/// (QuakeStore keeps it as its JSON), and a circle or a box of quaked.conf's `prefer` line.
public enum CatalogRegion: Sendable, Hashable, Codable {
    case near(lat: Double, lon: Double, radiusKm: Double)
    case box(minLat: Double, maxLat: Double, minLon: Double, maxLon: Double)
}
