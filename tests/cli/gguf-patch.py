#!/usr/bin/env python3
# gguf-patch.py FILE TENSOR OFFSET LENGTH: change LENGTH bytes of TENSOR's
# data in place, from OFFSET on (the top bit of every 4th byte flipped: an
# f32's sign), without changing the file's size. Prints the tensor's byte
# count. A GGUF reader of its own (no numpy, no gguf-py), for tests that
# craft a file that differs from another only inside one tensor.
import struct, sys

def main():
    path, want, off, length = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    f = open(path, 'r+b')
    buf = f.read()
    pos = 0
    def take(fmt):
        nonlocal pos
        v = struct.unpack_from('<' + fmt, buf, pos)
        pos += struct.calcsize('<' + fmt)
        return v[0]
    def string():
        nonlocal pos
        n = take('Q')
        s = buf[pos:pos + n]
        pos += n
        return s.decode('utf-8', 'replace')
    scalar = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: 'B', 10: 'Q', 11: 'q', 12: 'd'}
    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take('I'), take('Q')
            return [value(et) for _ in range(n)]
        return take(scalar[t])
    assert buf[:4] == b'GGUF'
    pos = 4
    take('I')
    n_tensors, n_kv = take('Q'), take('Q')
    align = 32
    for _ in range(n_kv):
        k = string()
        v = value(take('I'))
        if k == 'general.alignment':
            align = v
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take('I')
        for _ in range(nd):
            take('Q')
        take('I')
        infos.append((name, take('Q')))
    data = (pos + align - 1) // align * align
    offs = sorted(o for _, o in infos) + [len(buf) - data]
    for name, o in infos:
        if name == want:
            end = min(x for x in offs if x > o)  # the next tensor (or the end): its size, padded
            n = end - o
            assert off + length <= n, 'patch past the tensor (%d bytes)' % n
            b = bytearray(buf[data + o + off:data + o + off + length])
            for i in range(3, len(b), 4):
                b[i] ^= 0x80
            f.seek(data + o + off)
            f.write(b)
            f.close()
            print(n)
            return
    sys.exit('no tensor ' + want)

main()
