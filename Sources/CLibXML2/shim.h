// libxml2's SAX2 push parser, which QuakeSources' QuakeMLReader drives directly. The headers
// are Debian's libxml2-dev (pkg-config libxml-2.0: -I/usr/include/libxml2).
#ifndef QUAKED_CLIBXML2_SHIM_H
#define QUAKED_CLIBXML2_SHIM_H

#include <libxml/parser.h>
#include <libxml/SAX2.h>
#include <libxml/xmlerror.h>

#endif
