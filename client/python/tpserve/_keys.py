"""CurveZMQ keys from a tpserve key directory (`tpserve keys init DIR`, comm/curve_keys.h): the
coordinator's public key (DIR/coordinator.pub) and this client's pair (DIR/clients/NAME.key)."""
import os
from typing import Dict, Optional


def _read_key_file(path: str) -> Dict[str, str]:
    fields = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 3 or parts[1] != "=" or len(parts[2]) != 40:
                raise ValueError(f"{path}: expected 'public-key = <40 Z85 chars>' or 'secret-key = ...', got {line!r}")
            fields[parts[0]] = parts[2]
    return fields


def use_curve_keys(socket, keys_dir: Optional[str], key_name: Optional[str] = None) -> None:
    """Sets CURVE client options on a zmq socket before it connects (keys_dir None: plain TCP).
    key_name None picks the only pair in DIR/clients, or the one named default."""
    if not keys_dir:
        return
    import zmq
    clients = os.path.join(keys_dir, "clients")
    if key_name is None:
        names = sorted(f[:-4] for f in os.listdir(clients) if f.endswith(".key"))
        if len(names) == 1:
            key_name = names[0]
        elif "default" in names:
            key_name = "default"
        else:
            raise ValueError(f"{clients}: {len(names)} key pairs and none named default; pass key_name")
    server = _read_key_file(os.path.join(keys_dir, "coordinator.pub"))["public-key"]
    own = _read_key_file(os.path.join(clients, key_name + ".key"))
    socket.setsockopt(zmq.CURVE_SERVERKEY, server.encode())
    socket.setsockopt(zmq.CURVE_PUBLICKEY, own["public-key"].encode())
    socket.setsockopt(zmq.CURVE_SECRETKEY, own["secret-key"].encode())
