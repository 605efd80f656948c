import Foundation
import QuakeMap
import Testing

/// The projection, the rasterizer and the shipped coastlines, on known points.
@Suite struct ProjectionTests {
    @Test func theWorldMapsCornersCentreAndAntimeridian() throws {
        let world = Viewport.world
        let centre = try #require(world.position(lat: 0, lon: 0))
        #expect(centre.x == 0.5 && centre.y == 0.5)
        #expect(world.position(lat: 90, lon: -180).map { [$0.x, $0.y] } == [0, 0], "north-west corner")
        #expect(world.position(lat: -90, lon: 180).map { [$0.x, $0.y] } == [1, 1], "south-east corner: 180 is the east edge")
        #expect(world.position(lat: 0, lon: 90).map(\.x) == 0.75)
        #expect(world.position(lat: 91, lon: 0) == nil)
        #expect(world.position(lat: .nan, lon: 0) == nil)
    }

    @Test func aBoxAcrossTheAntimeridianIsOneView() throws {
        let aleutians = try #require(Viewport(minLat: 50, minLon: 170, maxLat: 60, maxLon: -170))
        #expect(aleutians.width == 20 && aleutians.height == 10)
        #expect(aleutians.position(lat: 55, lon: 175).map { [$0.x, $0.y] } == [0.25, 0.5])
        #expect(aleutians.position(lat: 55, lon: -175).map(\.x) == 0.75)
        #expect(aleutians.position(lat: 55, lon: 180).map(\.x) == 0.5)
        #expect(aleutians.position(lat: 55, lon: 0) == nil)
        #expect(Viewport(minLat: 10, minLon: 5, maxLat: 10, maxLon: 8) == nil, "no area")
        #expect(Viewport(minLat: 10, minLon: 5, maxLat: 12, maxLon: 5) == nil, "no area")
        #expect(Viewport(minLat: 10, minLon: 5, maxLat: 95, maxLon: 8) == nil, "out of range")
    }

    @Test func aCircleNearTheAntimeridianAndThePoles() throws {
        let fiji = try #require(Viewport(lat: -17, lon: 179, radiusKm: 500))
        #expect(fiji.position(lat: -17, lon: -178) != nil, "east of 180, inside")
        #expect(fiji.position(lat: -17, lon: 179)!.x > 0.45 && fiji.position(lat: -17, lon: 179)!.x < 0.55)
        let pole = try #require(Viewport(lat: 89, lon: 0, radiusKm: 300))
        #expect(pole.north == 90 && pole.width == 360, "near a pole: every longitude")
    }

    @Test func fittingGrowsTheShorterSideAboutTheCentre() throws {
        let box = try #require(Viewport(minLat: 30, minLon: -10, maxLat: 40, maxLon: 10))
        let wide = box.fitted(aspect: 4)
        #expect(wide.width == 40 && wide.height == 10 && wide.west == -20)
        let tall = box.fitted(aspect: 1)
        #expect(tall.height == 20 && tall.south == 25 && tall.width == 20)
        #expect(Viewport.world.fitted(aspect: 1).height == 180, "latitudes stay within ±90")
    }

    @Test func brailleDotsAndLines() {
        var canvas = BrailleCanvas(columns: 3, rows: 2)
        canvas.set(x: 0, y: 0)
        #expect(canvas.braille(column: 0, row: 0) == "⠁")
        canvas.set(x: 1, y: 3)
        #expect(canvas.braille(column: 0, row: 0) == "⢁")
        canvas.set(x: 99, y: 0)  // outside: ignored
        canvas.line(x0: 0, y0: 4, x1: 5, y1: 4)
        #expect((0..<3).map { canvas.dotMask(column: $0, row: 1) } == [0x09, 0x09, 0x09])
        #expect(canvas.braille(column: 2, row: 0) == "⠀")
    }

    @Test func pointsFallInTheCellsOfTheirDots() {
        // 90 × 45 cells: 180 × 180 dots, two degrees a dot.
        var raster = MapRaster(viewport: .world, columns: 90, rows: 45, coastlines: [])
        #expect(raster.cell(lat: 0, lon: 0).map { [$0.column, $0.row] } == [45, 22])
        #expect(raster.cell(lat: 90, lon: -180).map { [$0.column, $0.row] } == [0, 0])
        #expect(raster.cell(lat: -90, lon: 180).map { [$0.column, $0.row] } == [89, 44])
        #expect(raster.cell(lat: -30, lon: -120).map { [$0.column, $0.row] } == [15, 30])
        let marked = raster.mark(lat: 10, lon: 20, style: 3)
        #expect(marked)
        #expect(raster.canvas.mark(column: 50, row: 20) == 3)
    }

    @Test func aCoastlineAcrossTheSeamIsDrawnOnBothSidesNotAcrossTheMap() {
        // A line from 175°E to 175°W along 55°N, on a world map and on a box across 180°.
        let line = [GeoPoint(lon: 175, lat: 55), GeoPoint(lon: -175, lat: 55)]
        let world = MapRaster(viewport: .world, columns: 90, rows: 45, coastlines: [line])
        let row = 8  // 55°N: dot 35 of 180
        let dotted = (0..<90).filter { world.canvas.dotMask(column: $0, row: row) != 0 }
        #expect(dotted.allSatisfy { $0 < 3 || $0 > 86 }, "only at the edges: \(dotted)")
        #expect(dotted.contains(0) && dotted.contains(89))
        let box = MapRaster(
            viewport: Viewport(minLat: 50, minLon: 170, maxLat: 60, maxLon: -170)!, columns: 40, rows: 10,
            coastlines: [line])
        let across = (0..<40).filter { column in (0..<10).contains { box.canvas.dotMask(column: column, row: $0) != 0 } }
        #expect(across == Array(10...30), "one straight piece from 175°E to 175°W: \(across)")
    }

    @Test func theShippedCoastlinesDecode() {
        let lines = Coastlines.lines
        #expect(lines.count == 134)
        #expect(lines.map(\.count).reduce(0, +) == 5127)
        let points = lines.flatMap { $0 }
        #expect(points.allSatisfy { (-180...180).contains($0.lon) && (-90...90).contains($0.lat) })
        #expect(points.contains { $0.lat < -84 }, "Antarctica")
        // Cape Agulhas, Africa's southern tip, is on a line: some point near 34.8°S 20°E.
        #expect(points.contains { abs($0.lat + 34.8) < 0.3 && abs($0.lon - 20) < 0.5 })
        // The encoding: [2 points] (1.00, 2.00), then (+0.50, -0.25).
        let bytes: [UInt8] = [2, 200, 1, 144, 3, 100, 49]
        #expect(Coastlines.decode(Data(bytes).base64EncodedString()) == [[GeoPoint(lon: 1, lat: 2), GeoPoint(lon: 1.5, lat: 1.75)]])
        #expect(Coastlines.decode("not base64 at all!") == [])
        #expect(Coastlines.decode(Data([5, 1]).base64EncodedString()) == [], "truncated: nothing half-decoded")
    }
}
