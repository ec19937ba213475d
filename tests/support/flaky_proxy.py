"""A TCP proxy on 127.0.0.1 in front of the local S3 endpoint that can fail on demand: while
`down`, every connection (new or open) is cut, as when an endpoint or the network between
goes away. Lets fault tests make S3 unreachable for a while, then come back."""

from __future__ import annotations

import select
import socket
import threading


class FlakyProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.down = False
        self.num_refused = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def outage(self, seconds: float) -> None:
        """Down now, back up after `seconds`."""
        self.down = True
        timer = threading.Timer(seconds, self._up)
        timer.daemon = True
        timer.start()

    def _up(self) -> None:
        self.down = False

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.down:
                self.num_refused += 1
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        sockets = [client, upstream]
        try:
            while not self.down and not self._closed:
                readable, _, _ = select.select(sockets, [], [], 0.1)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    (upstream if sock is client else client).sendall(data)
        except OSError:
            return
        finally:
            for sock in sockets:
                sock.close()
