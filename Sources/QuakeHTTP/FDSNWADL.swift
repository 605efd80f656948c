import QuakeHTTPQuery

/// The service's `application.wadl`: WADL 2009/02, as the FDSN specification asks and ObsPy's
/// WADL parser reads it (a `query` resource whose GET lists every parameter with its type,
/// default and options; `count`, `version`, `catalogs`, `contributors` and the WADL itself).
enum FDSNWADL {
    static func document(base: String) -> String {
        var out: [UInt8] = []
        func line(_ text: String) { out.append(contentsOf: (text + "\n").utf8) }
        func attribute(_ text: String) -> String {
            var bytes: [UInt8] = []
            appendEscaped(text, to: &bytes)
            return String(decoding: bytes, as: UTF8.self)
        }
        func parameters(indent: String) {
            for p in FDSNQuery.parameters {
                for name in [p.name] + p.aliases {
                    var tag = "\(indent)<param name=\"\(name)\" style=\"query\" type=\"\(p.type)\" required=\"false\""
                    if let value = p.defaultValue { tag += " default=\"\(attribute(value))\"" }
                    line(tag + ">")
                    let doc = name == p.name ? p.doc : "Same as \(p.name). " + p.doc
                    line("\(indent)  <doc xml:lang=\"en\" title=\"\(name)\">\(attribute(doc))</doc>")
                    for option in p.options { line("\(indent)  <option value=\"\(attribute(option))\"/>") }
                    line("\(indent)</param>")
                }
            }
        }
        line("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
        line(
            "<application xmlns=\"http://wadl.dev.java.net/2009/02\" xmlns:xs=\"http://www.w3.org/2001/XMLSchema\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">"
        )
        line("  <doc title=\"quaked FDSN event service \(FDSNEventService.serviceVersion)\">The merged catalog of quaked's store.</doc>")
        line("  <resources base=\"\(attribute(base))\">")
        line("    <resource path=\"/\">")
        line("      <method name=\"GET\">")
        line("        <response>")
        line("          <representation mediaType=\"text/plain\"/>")
        line("        </response>")
        line("      </method>")
        line("    </resource>")
        line("    <resource path=\"query\">")
        line("      <method name=\"GET\" id=\"query\">")
        line("        <request>")
        parameters(indent: "          ")
        line("        </request>")
        line("        <response status=\"200\">")
        line("          <representation mediaType=\"application/xml\"/>")
        line("          <representation mediaType=\"text/plain\"/>")
        line("          <representation mediaType=\"application/json\"/>")
        line("        </response>")
        line("        <response status=\"204 400 404 500 503\">")
        line("          <representation mediaType=\"text/plain\"/>")
        line("        </response>")
        line("      </method>")
        line("    </resource>")
        line("    <resource path=\"count\">")
        line("      <method name=\"GET\" id=\"count\">")
        line("        <request>")
        parameters(indent: "          ")
        line("        </request>")
        line("        <response status=\"200\">")
        line("          <representation mediaType=\"text/plain\"/>")
        line("        </response>")
        line("        <response status=\"400 500 503\">")
        line("          <representation mediaType=\"text/plain\"/>")
        line("        </response>")
        line("      </method>")
        line("    </resource>")
        for (path, type) in [
            ("catalogs", "application/xml"), ("contributors", "application/xml"), ("version", "text/plain"),
            ("application.wadl", "application/xml"),
        ] {
            line("    <resource path=\"\(path)\">")
            line("      <method name=\"GET\">")
            line("        <response>")
            line("          <representation mediaType=\"\(type)\"/>")
            line("        </response>")
            line("      </method>")
            line("    </resource>")
        }
        line("  </resources>")
        line("</application>")
        return String(decoding: out, as: UTF8.self)
    }

    /// `text` escaped for XML text or a quoted attribute.
    static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out.append(contentsOf: "&amp;".utf8)
            case "<": out.append(contentsOf: "&lt;".utf8)
            case ">": out.append(contentsOf: "&gt;".utf8)
            case "\"": out.append(contentsOf: "&quot;".utf8)
            case "'": out.append(contentsOf: "&apos;".utf8)
            default:
                if scalar.value < 0x20 && scalar != "\t" && scalar != "\n" && scalar != "\r" {
                    out.append(contentsOf: [0xEF, 0xBF, 0xBD])
                } else {
                    UTF8.encode(scalar) { out.append($0) }
                }
            }
        }
    }
}
