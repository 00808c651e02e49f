"""Watching a client's connection to the coordinator (both clients): the coordinator holds request state, so a
request in flight when an established connection drops (the coordinator died or restarted) is lost, and its
client should learn it at once rather than at its timeout. The DEALER's monitor reports handshakes and
disconnections; a connection whose handshake never completed (a refused CURVE key) carried nothing."""
import zmq

from .errors import ConnectionLostError

MONITORED_EVENTS = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED


class ConnectionWatch:
    def __init__(self, endpoint: str):
        self._endpoint = endpoint
        self._is_up = False

    def dropped(self, event: int) -> bool:
        """Takes one monitor event; True when it is the drop of an established connection."""
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self._is_up = True
        elif event == zmq.EVENT_DISCONNECTED and self._is_up:
            self._is_up = False
            return True
        return False

    def error(self, request_id: int) -> ConnectionLostError:
        return ConnectionLostError(f"connection to the coordinator at {self._endpoint} lost: the request is gone with "
                                   "it (it holds request state); send it again (with a seed, the same tokens)",
                                   request_id)
