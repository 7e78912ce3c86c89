"""as_user(uid, fn): runs fn() in a forked child as uid (gid = uid, no
supplementary groups) and returns 0 or the errno of the OSError it raised;
any other exception is raised again in the parent as RuntimeError.  For the
permission tests (run as root), imported from the scripts' directory."""
import os


def as_user(uid, fn):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            fn()
        except OSError as e:
            code = e.errno
        except BaseException as e:
            code = 255
            os.write(w, repr(e).encode())
        os.write(w, b"\n%d" % code)
        os._exit(0)
    os.close(w)
    out = b""
    while True:
        c = os.read(r, 4096)
        if not c:
            break
        out += c
    os.close(r)
    os.waitpid(pid, 0)
    msg, _, code = out.rpartition(b"\n")
    if int(code) == 255:
        raise RuntimeError(msg.decode())
    return int(code)
