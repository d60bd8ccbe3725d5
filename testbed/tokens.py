#!/usr/bin/env python3
"""The test bed's OAuth 2 token endpoint and key set, on loopback, for the broker's OAUTHBEARER listener.

    tokens.py --port PORT --keys DIR

Serves, over plain HTTP on 127.0.0.1:PORT:

  POST /token   OAuth 2 client credentials grant (RFC 6749 section 4.4), the client authenticated with
                HTTP Basic (as librdkafka's `sasl.oauthbearer.method=oidc` sends it) or with
                client_id/client_secret in the form body. Answers {"access_token": <JWT>, ...}, or 401
                {"error": "invalid_client"} for an unknown client or a wrong secret.
  GET  /jwks    the JSON Web Key Set (RFC 7517) the broker validates tokens against: the public key of
                DIR/signer.key.

Clients (id: secret), fixed test credentials on a loopback listener:

  flow-operator: flow-operator-secret      a token signed with DIR/signer.key, which the broker accepts
  flow-rejected: flow-rejected-secret      a well-formed token signed with DIR/rogue.key, a key the
                                           key set does not hold, which the broker rejects

Tokens are RS256 JWTs (RFC 7519) with iss, aud, sub (the client id), iat, nbf, exp (one hour) and
scope. Signing uses the openssl command-line tool, so nothing outside Python's standard library and
openssl is needed; the keys are made by `testbed/tb up`. Each request is logged to stderr, without
secrets.
"""

import argparse
import base64
import json
import subprocess
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

AUDIENCE = "kafka-testbed"
LIFETIME = 3600
CLIENTS = {
    "flow-operator": ("flow-operator-secret", "signer"),
    "flow-rejected": ("flow-rejected-secret", "rogue"),
}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def modulus(key: str) -> bytes:
    out = subprocess.run(["openssl", "rsa", "-in", key, "-noout", "-modulus"], check=True,
                         capture_output=True, text=True).stdout
    return bytes.fromhex(out.strip().split("=", 1)[1])


class Keys:
    def __init__(self, directory: str):
        self.dir = directory
        self.kid = {name: f"testbed-{name}" for name in ("signer", "rogue")}
        n = modulus(f"{directory}/signer.key")
        self.jwks = json.dumps({"keys": [{
            "kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid["signer"],
            "n": b64url(n), "e": b64url((65537).to_bytes(3, "big")),
        }]}).encode()

    def sign(self, name: str, claims: dict) -> str:
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid[name]}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", f"{self.dir}/{name}.key"],
                             input=signing_input.encode(), check=True, capture_output=True).stdout
        return f"{signing_input}.{b64url(sig)}"


class Handler(BaseHTTPRequestHandler):
    server_version = "flow-testbed-tokens"
    keys: Keys = None  # set in main
    issuer = ""

    def log_message(self, fmt, *args):  # stderr, one line, no secrets (the path and status only)
        sys.stderr.write("tokens: %s %s\n" % (self.address_string(), fmt % args))

    def reply(self, code: int, body: bytes, content_type="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.split("?")[0] in ("/jwks", "/.well-known/jwks.json"):
            self.reply(200, self.keys.jwks)
        elif self.path == "/healthz":
            self.reply(200, b"ok", "text/plain")
        else:
            self.reply(404, b'{"error":"not_found"}')

    def do_POST(self):
        if self.path.split("?")[0] != "/token":
            self.reply(404, b'{"error":"not_found"}')
            return
        length = int(self.headers.get("Content-Length") or 0)
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode(errors="replace")).items()}
        client_id, secret = form.get("client_id"), form.get("client_secret")
        auth = self.headers.get("Authorization", "")
        if auth.lower().startswith("basic "):
            try:
                client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            except ValueError:
                client_id = secret = None
        if form.get("grant_type") != "client_credentials":
            self.reply(400, b'{"error":"unsupported_grant_type"}')
            return
        known = CLIENTS.get(client_id or "")
        if known is None or known[0] != secret:
            self.reply(401, b'{"error":"invalid_client","error_description":"unknown client or wrong secret"}')
            return
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": AUDIENCE, "sub": client_id, "iat": now, "nbf": now - 5,
                  "exp": now + LIFETIME, "jti": str(uuid.uuid4()), "scope": form.get("scope", "kafka")}
        token = self.keys.sign(known[1], claims)
        self.reply(200, json.dumps({"access_token": token, "token_type": "Bearer",
                                    "expires_in": LIFETIME}).encode())


def main():
    p = argparse.ArgumentParser(description="the test bed's OAuth token endpoint and JWKS")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--keys", required=True, help="directory with signer.key and rogue.key (RSA, PEM)")
    a = p.parse_args()
    Handler.keys = Keys(a.keys)
    Handler.issuer = f"http://127.0.0.1:{a.port}"
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    sys.stderr.write(f"tokens: serving /token and /jwks on http://127.0.0.1:{a.port}\n")
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
