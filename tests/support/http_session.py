"""A logged-in browser session over plain HTTP (stdlib only): cookies, CSRF, the hidden fields of a form.

For tests that drive the real daphne the way a browser posts its forms, without the browser.
"""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

HIDDEN_FIELD = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


@dataclass(frozen=True)
class HttpReply:
    status: int
    location: str
    body: str


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class HttpSession:
    def __init__(self, base_url: str, *, timeout: float = 30, headers: dict[str, str] | None = None) -> None:
        self.base_url = base_url
        self.timeout = timeout
        # Sent with every request, e.g. the X-Forwarded-For a proxy in front would add.
        self.headers = headers or {}
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies), _NoRedirects())

    def _send(self, path: str, data: dict[str, object] | None = None) -> HttpReply:
        body = None if data is None else urllib.parse.urlencode({k: str(v) for k, v in data.items()}).encode()
        headers = {**self.headers, "Referer": self.base_url + path}
        request = urllib.request.Request(self.base_url + path, data=body, headers=headers)
        try:
            with self.opener.open(request, timeout=self.timeout) as response:
                return HttpReply(response.status, response.headers.get("Location", ""), response.read().decode())
        except urllib.error.HTTPError as error:
            return HttpReply(error.code, error.headers.get("Location", ""), error.read().decode(errors="replace"))

    def get(self, path: str) -> HttpReply:
        return self._send(path)

    def post(self, path: str, data: dict[str, object]) -> HttpReply:
        return self._send(path, data)

    def form(self, page: str, action: str) -> dict[str, str]:
        """The hidden fields (CSRF token, submission key, ...) of the form posting to `action` on `page`."""
        html = self.get(page).body
        found = re.search(rf'<form[^>]*action="{re.escape(action)}".*?</form>', html, re.S)
        assert found, f"no form posting to {action} on {page}"
        return dict(HIDDEN_FIELD.findall(found.group(0)))

    def log_in(self, username: str, password: str) -> None:
        fields = dict(HIDDEN_FIELD.findall(self.get("/login/").body))
        answer = self.post("/login/", {**fields, "username": username, "password": password})
        assert answer.status == 302, f"login failed: {answer.status}"
