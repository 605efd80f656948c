/// A grid of terminal cells, each 2 dots wide and 4 high (a Unicode braille pattern, U+2800 to
/// U+28FF), with a mark per cell for what is drawn over the dots (a quake).
public struct BrailleCanvas: Sendable {
    public let columns: Int
    public let rows: Int
    private var dots: [UInt8]
    private var marks: [Int]

    public init(columns: Int, rows: Int) {
        self.columns = max(0, columns)
        self.rows = max(0, rows)
        dots = Array(repeating: 0, count: self.columns * self.rows)
        marks = Array(repeating: -1, count: self.columns * self.rows)
    }

    public var dotWidth: Int { columns * 2 }
    public var dotHeight: Int { rows * 4 }

    /// The bit of each dot in a braille cell, by [x][y]: dots 1-2-3-7 down the left, 4-5-6-8
    /// down the right.
    private static let bits: [[UInt8]] = [[0x01, 0x02, 0x04, 0x40], [0x08, 0x10, 0x20, 0x80]]

    /// Sets one dot; dots outside the canvas are ignored.
    public mutating func set(x: Int, y: Int) {
        guard x >= 0, y >= 0, x < dotWidth, y < dotHeight else { return }
        dots[(y / 4) * columns + x / 2] |= Self.bits[x % 2][y % 4]
    }

    /// A straight line of dots (Bresenham's), clipped to the canvas.
    public mutating func line(x0: Int, y0: Int, x1: Int, y1: Int) {
        // Both ends beyond the same edge: nothing of it shows.
        if (x0 < 0 && x1 < 0) || (y0 < 0 && y1 < 0) || (x0 >= dotWidth && x1 >= dotWidth)
            || (y0 >= dotHeight && y1 >= dotHeight)
        {
            return
        }
        let dx = abs(x1 - x0)
        let dy = -abs(y1 - y0)
        let sx = x0 < x1 ? 1 : -1
        let sy = y0 < y1 ? 1 : -1
        var error = dx + dy
        var x = x0
        var y = y0
        // A segment is at most one map across (callers unwrap longitudes), so this ends.
        while true {
            set(x: x, y: y)
            if x == x1 && y == y1 { return }
            let twice = 2 * error
            if twice >= dy {
                error += dy
                x += sx
            }
            if twice <= dx {
                error += dx
                y += sy
            }
        }
    }

    /// Marks a cell (a quake) with the caller's style number; a later mark wins.
    public mutating func mark(column: Int, row: Int, style: Int) {
        guard column >= 0, row >= 0, column < columns, row < rows else { return }
        marks[row * columns + column] = style
    }

    /// The dots of a cell as a bit mask (0: none).
    public func dotMask(column: Int, row: Int) -> UInt8 { dots[row * columns + column] }

    /// The mark of a cell, if any.
    public func mark(column: Int, row: Int) -> Int? {
        let mark = marks[row * columns + column]
        return mark < 0 ? nil : mark
    }

    /// The braille character of a cell's dots (U+2800, blank, for none).
    public func braille(column: Int, row: Int) -> Character {
        Character(Unicode.Scalar(0x2800 + UInt32(dotMask(column: column, row: row)))!)
    }
}

/// A map drawn on a ``BrailleCanvas``: the coastlines of a viewport, and points on it.
public struct MapRaster: Sendable {
    public let viewport: Viewport
    public var canvas: BrailleCanvas

    /// Draws the coastlines of `viewport` on a canvas of `columns` × `rows` cells.
    public init(viewport: Viewport, columns: Int, rows: Int, coastlines: [[GeoPoint]] = Coastlines.lines) {
        self.viewport = viewport
        canvas = BrailleCanvas(columns: columns, rows: rows)
        for line in coastlines { draw(line) }
    }

    /// The dot a point falls on (unclipped: outside the canvas when outside the viewport),
    /// with its longitude taken as `lon` (already unwrapped).
    func dot(lat: Double, unwrappedLon lon: Double) -> (x: Int, y: Int) {
        let (x, y) = viewport.fraction(lat: lat, unwrappedLon: lon)
        return (
            Self.clampedInt(x * Double(canvas.dotWidth), upper: canvas.dotWidth),
            Self.clampedInt(y * Double(canvas.dotHeight), upper: canvas.dotHeight)
        )
    }

    /// floor(value), the right and bottom edges drawn on the last dot, far values bounded.
    private static func clampedInt(_ value: Double, upper: Int) -> Int {
        if value == Double(upper) { return upper - 1 }
        return Int(max(-1e6, min(1e6, value.rounded(.down))))
    }

    private mutating func draw(_ line: [GeoPoint]) {
        guard var previous = line.first else { return }
        var previousLon = viewport.unwrap(previous.lon)
        for point in line.dropFirst() {
            // The shorter way round, from where the last point was drawn: a segment never spans
            // the map because of the unwrapping.
            let lon = previousLon + previous.eastwardStep(to: point)
            segment(previous.lat, previousLon, point.lat, lon)
            // Past the seam of the viewport (west + 360): the part beyond shows at the west edge.
            if lon >= viewport.west + 360 { segment(previous.lat, previousLon - 360, point.lat, lon - 360) }
            if lon < viewport.west { segment(previous.lat, previousLon + 360, point.lat, lon + 360) }
            previous = point
            previousLon = viewport.unwrap(lon)
        }
    }

    private mutating func segment(_ lat0: Double, _ lon0: Double, _ lat1: Double, _ lon1: Double) {
        let a = dot(lat: lat0, unwrappedLon: lon0)
        let b = dot(lat: lat1, unwrappedLon: lon1)
        canvas.line(x0: a.x, y0: a.y, x1: b.x, y1: b.y)
    }

    /// The cell a point falls in, nil outside the viewport.
    public func cell(lat: Double, lon: Double) -> (column: Int, row: Int)? {
        guard let position = viewport.position(lat: lat, lon: lon) else { return nil }
        let x = Self.clampedInt(position.x * Double(canvas.dotWidth), upper: canvas.dotWidth)
        let y = Self.clampedInt(position.y * Double(canvas.dotHeight), upper: canvas.dotHeight)
        return (min(canvas.columns - 1, max(0, x / 2)), min(canvas.rows - 1, max(0, y / 4)))
    }

    /// Marks the cell of a point (a quake) with a style; false when it is outside the viewport.
    @discardableResult
    public mutating func mark(lat: Double, lon: Double, style: Int) -> Bool {
        guard let cell = cell(lat: lat, lon: lon) else { return false }
        canvas.mark(column: cell.column, row: cell.row, style: style)
        return true
    }
}
