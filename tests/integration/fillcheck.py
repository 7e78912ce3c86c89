import os, sys, errno, hashlib
path = sys.argv[1]; mode = sys.argv[2]
def pat(off, n):
    out = bytearray()
    blk = off // 4096
    while len(out) < n:
        out += hashlib.sha256(b'%d' % blk).digest() * 128
        blk += 1
    return bytes(out[:n])
if mode == 'write':
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    off = 0; err = None
    while True:
        try:
            n = os.write(fd, pat(off, 1 << 20))
        except OSError as e:
            err = e.errno; break
        off += n
    try: os.close(fd)
    except OSError as e: err = err or e.errno
    print(off, errno.errorcode.get(err, err))
else:
    d = open(path, 'rb').read()
    good = d == pat(0, len(d))
    print(len(d), 'prefix' if good else 'MISMATCH')
