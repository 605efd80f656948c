// Fuzzes the `prefer` line of quaked.conf (QuakeConfigValues' PreferenceConfiguration(parsing:)):
// `AGENCY[,AGENCY...] region=REGION`, the region a circle, a box or a GeoJSON polygon file. The
// input is the line, then optionally a NUL and the bytes of a polygon file: a `region=/...` in the
// line is pointed at that file (written to a directory of the target's own), so the fuzzer never
// reads the machine's files. It must never crash or hang, and:
// - a rejected line is a ConfigValue.Problem (never another error) with a message that quotes
//   what it rejects or names the line (`prefer AGENCIES: ...`);
// - an accepted line has 1 or more agencies, each 1 to 32 of [A-Za-z0-9._-], no two equal with
//   case ignored; a circle's centre in range and radius over 0 and at most 20038 km; a box's
//   latitudes -90 to 90 (south <= north), longitudes -180 to 180 and not equal; a file region is
//   the file named, with at least one polygon;
// - an accepted line written back (`description`, as quaked --check-config shows it) reads back
//   equal, and its regional preference (what the Associator ranks by) has the same agencies.

import FuzzSupport
import QuakeConfigValues
import QuakeFeed

#if canImport(Glibc)
    import Glibc
#endif

/// The directory of the polygon file, made once per process.
let directory: String = {
    var template = Array("/tmp/quaked-fuzz-prefer-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { fail("mkdtemp: \(errno)") }
    return String(cString: made)
}()
let polygonPath = directory + "/region.geojson"

func writeFile(_ bytes: ArraySlice<UInt8>, to path: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fail("cannot write \(path): \(errno)") }
    defer { close(fd) }
    var offset = bytes.startIndex
    while offset < bytes.endIndex {
        let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written > 0 else { fail("cannot write \(path): \(errno)") }
        offset += written
    }
}

func parse(_ line: String) -> Result<PreferenceConfiguration, ConfigValue.Problem> {
    do {
        return .success(try PreferenceConfiguration(parsing: line))
    } catch let problem as ConfigValue.Problem {
        return .failure(problem)
    } catch {
        fail("PreferenceConfiguration threw something other than a ConfigValue.Problem: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzPreferLine(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = bytes(start, count)
    let shown = show(input)
    let nul = input.firstIndex(of: 0)
    var line = String(decoding: input[..<(nul ?? input.endIndex)], as: UTF8.self)
    if line.contains("region=/") {
        // Every polygon file named is the input's (whitespace is what separates words, as for the parser).
        writeFile(nul.map { input[($0 + 1)...] } ?? [], to: polygonPath)
        line = line.split(whereSeparator: \.isWhitespace).map {
            $0.hasPrefix("region=/") ? "region=\(polygonPath)" : $0
        }
        .joined(separator: " ")
    }
    switch parse(line) {
    case .failure(let problem):
        let message = problem.message
        // By bytes: a quoted combining mark makes one Character of the quote and the mark.
        check(
            message.utf8.starts(with: "prefer ".utf8) || message.utf8.starts(with: "'".utf8),
            "the error '\(message)' neither quotes what it rejects nor names the line: \(shown)")
    case .success(let preference):
        let agencies = preference.agencies
        check(!agencies.isEmpty, "no agency accepted: \(shown)")
        for agency in agencies {
            check(PreferenceConfiguration.isValidAgency(agency), "the agency '\(agency)' accepted: \(shown)")
            check(
                agency.utf8.count <= 32
                    && agency.utf8.allSatisfy { b in
                        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D
                            || b == 0x2E || b == 0x5F
                    },
                "the agency '\(agency)' accepted: \(shown)")
        }
        check(Set(agencies.map { $0.lowercased() }).count == agencies.count, "an agency named twice accepted: \(shown)")
        switch preference.area {
        case .shape(.near(let lat, let lon, let radiusKm)):
            check((-90...90).contains(lat) && (-180...180).contains(lon), "centre \(lat),\(lon) accepted: \(shown)")
            check(radiusKm > 0 && radiusKm <= 20_038, "radius \(radiusKm) km accepted: \(shown)")
        case .shape(.box(let minLat, let maxLat, let minLon, let maxLon)):
            check(
                (-90...90).contains(minLat) && (-90...90).contains(maxLat) && minLat <= maxLat,
                "latitudes \(minLat)...\(maxLat) accepted: \(shown)")
            check(
                (-180...180).contains(minLon) && (-180...180).contains(maxLon) && minLon != maxLon,
                "longitudes \(minLon), \(maxLon) accepted: \(shown)")
        case .file(let path, let polygons):
            check(path == polygonPath, "a polygon file other than the input's: \(path): \(shown)")
            check(!polygons.polygons.isEmpty, "a polygon file without a polygon accepted: \(shown)")
        }
        // Written back, it reads the same (a polygon file is read again: the same file).
        let text = preference.description
        switch parse(text) {
        case .success(let again):
            check(again == preference, "'\(text)' reads back as '\(again)': \(shown)")
        case .failure(let problem):
            fail("'\(text)', written back, is rejected (\(problem.message)): \(shown)")
        }
        check(preference.regionalPreference.agencies == agencies, "the regional preference's agencies differ: \(shown)")
    }
    return 0
}

runFuzzer(fuzzPreferLine)
