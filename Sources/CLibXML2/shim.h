// libxml2's SAX2 push parser, which QuakeSources' QuakeMLReader drives directly. The headers
// are Debian's libxml2-dev (pkg-config libxml-2.0: -I/usr/include/libxml2).
#ifndef QUAKED_CLIBXML2_SHIM_H
#define QUAKED_CLIBXML2_SHIM_H

// Debian builds libxml2 with ICU, so encoding.h includes ICU's <unicode/ucnv.h>, whose
// UErrorCode then clashes with the copy in Foundation's _FoundationICU module in any Swift module
// that imports both ("... is not present in definition of 'enum UErrorCode' in module
// 'CLibXML2'", on a clean build). Only the last two fields of xmlCharEncodingHandler depend on
// it, a struct the reader never touches (it holds pointers to it at most), so the headers are
// read without it. The library itself is unchanged.
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED

#include <libxml/parser.h>
#include <libxml/SAX2.h>
#include <libxml/xmlerror.h>

#endif
