#!/usr/bin/env python3
"""Prints a PNG's size, then the colour of each pixel asked for.

    png_pixels.py FILE [X,Y ...]
    -> "WIDTH HEIGHT", then "R G B" per X,Y

For the map tests: rsvg-convert writes the PNG, this reads it back (8-bit greyscale, RGB or
RGBA, not interlaced), with the standard library only (zlib)."""
import struct
import sys
import zlib


def read(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        sys.exit("unsupported PNG: depth %d, colour type %d, interlace %d" % (depth, colour, interlace))
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous, pos = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[pos], bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        previous = line
    return width, height, channels, rows


def main():
    width, height, channels, rows = read(sys.argv[1])
    print(width, height)
    for arg in sys.argv[2:]:
        x, y = (int(v) for v in arg.split(","))
        px = rows[y][x * channels:(x + 1) * channels]
        rgb = list(px[:3]) if channels >= 3 else [px[0]] * 3
        print(*rgb)


main()
