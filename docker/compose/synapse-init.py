#!/usr/bin/env python3
"""Prepare Synapse's /data for docker/compose.yaml, with zooid registered as an appservice.

Runs inside the Synapse image (it needs Synapse and PyYAML, which Synapse depends on) before
Synapse starts. The first run generates homeserver.yaml and the signing key; every run
rewrites the listener and the appservice registration from the environment, so changing a
token or the push URL only takes a restart. Everything else in homeserver.yaml is the
operator's and is kept.

Environment:
  SYNAPSE_SERVER_NAME   required: the server name (the part after ':' in user ids)
  MATRIX_AS_TOKEN       required: the appservice token zooid uses towards Synapse
  MATRIX_HS_TOKEN       required: the token Synapse uses when pushing to zooid
  SYNAPSE_BIND          listener address, default 127.0.0.1
  SYNAPSE_PORT          listener port, default 8008
  ZOOID_PUSH_URL        where Synapse pushes to zooid, default http://127.0.0.1:9000
  ZOOID_USER_REGEX      zooid's exclusive user namespace, default @zooid-.*:SERVER_NAME
  ZOOID_ALIAS_REGEX     room aliases zooid may create (not exclusive), default #.*:SERVER_NAME
  ZOOID_SENDER          the appservice's own localpart, default zooid
"""
import os
import re
import subprocess
import sys

import yaml

DATA = os.environ.get("SYNAPSE_DATA", "/data")


def need(name):
    value = os.environ.get(name, "")
    if not value:
        sys.exit(f"synapse-init: {name} is not set")
    return value


def write(path, doc, mode):
    tmp = path + ".tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    os.replace(tmp, path)


def main():
    server = need("SYNAPSE_SERVER_NAME")
    as_token = need("MATRIX_AS_TOKEN")
    hs_token = need("MATRIX_HS_TOKEN")
    if as_token == hs_token:
        sys.exit("synapse-init: MATRIX_AS_TOKEN and MATRIX_HS_TOKEN must differ")
    port = int(os.environ.get("SYNAPSE_PORT", "8008"))
    bind = os.environ.get("SYNAPSE_BIND", "127.0.0.1")
    push_url = os.environ.get("ZOOID_PUSH_URL", "http://127.0.0.1:9000")
    user_regex = os.environ.get("ZOOID_USER_REGEX") or "@zooid-.*:" + re.escape(server)
    alias_regex = os.environ.get("ZOOID_ALIAS_REGEX") or "#.*:" + re.escape(server)
    sender = os.environ.get("ZOOID_SENDER", "zooid")

    config_path = os.path.join(DATA, "homeserver.yaml")
    registration_path = os.path.join(DATA, "zooid-registration.yaml")

    if not os.path.exists(config_path):
        subprocess.run(
            [sys.executable, "-m", "synapse.app.homeserver",
             "--server-name", server, "--config-path", config_path,
             "--data-directory", DATA, "--generate-config", "--report-stats=no"],
            check=True,
        )

    with open(config_path) as f:
        config = yaml.safe_load(f)
    if config.get("server_name") != server:
        sys.exit(f"synapse-init: {config_path} is for server {config.get('server_name')!r}, "
                 f"not {server!r}; a server name cannot change once users exist")

    config["listeners"] = [{
        "port": port,
        "bind_addresses": [bind],
        "type": "http",
        "tls": False,
        "x_forwarded": bind != "127.0.0.1",
        "resources": [{"names": ["client", "federation"], "compress": False}],
    }]
    files = [p for p in config.get("app_service_config_files") or [] if p != registration_path]
    config["app_service_config_files"] = files + [registration_path]
    write(config_path, config, 0o600)

    write(registration_path, {
        "id": "zooid",
        "url": push_url,
        "as_token": as_token,
        "hs_token": hs_token,
        "sender_localpart": sender,
        # zooid sends for many agents at once; Synapse's default appservice limits throttle it.
        "rate_limited": False,
        "namespaces": {
            "users": [{"regex": user_regex, "exclusive": True}],
            # Synapse lets an appservice create only aliases in its namespace (M_EXCLUSIVE
            # otherwise), and zooid creates the rooms zooid.yaml names when they are missing.
            # Not exclusive, so people can still create aliases of their own.
            "aliases": [{"regex": alias_regex, "exclusive": False}],
            "rooms": [],
        },
    }, 0o600)
    print(f"synapse-init: {config_path} listens on {bind}:{port}; zooid at {push_url} "
          f"owns {user_regex}, may create {alias_regex}")


if __name__ == "__main__":
    main()
