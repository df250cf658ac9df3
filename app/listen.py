"""Whether the app can listen where it was asked to, checked before anything slow starts: a port in use is
one line that names it, not a web server's traceback."""
from __future__ import annotations

import errno
import socket


def port_refusal(host: str, port: int, *, searches_without_port: bool = False) -> str | None:
    """Why the app cannot listen on host:port, or None when it can. `searches_without_port`: the command takes the
    first free port from 7860 when --port is left out (the app; `serve` has fixed ports), which the refusal says."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: a closed port is free
        try:
            probe.bind((host, port))
        except OverflowError:
            return f"--port {port} is not a port number (1-65535)."
        except socket.gaierror:
            return f"--host {host} is not an address of this computer."
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                return (f"Port {port} is already in use (another VoiceDesk, or another program): choose another "
                        "with --port" + (", or leave --port out to take the first free one from 7860."
                                         if searches_without_port else "."))
            if err.errno == errno.EACCES:
                return f"Port {port} needs administrator rights here: choose one above 1023 with --port."
            return f"Cannot listen on {host}:{port} ({err.strerror})."
    return None
