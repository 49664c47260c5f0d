"""approval_schema.js (imported by approvals.js) in Chromium without a server: the JSON-schema check that runs
before a set is submitted."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect
from pydantic import BaseModel, Field
from pydantic_ai import Tool

SCRIPTS = Path(__file__).resolve().parents[2] / "static" / "js"
ORIGIN = "http://scripts.test"
PAGE = """<!doctype html><html><body><script type="module">
import { validate } from "./approval_schema.js";
window.validate = validate;
document.body.dataset.ready = "yes";
</script></body></html>"""


class DeployTarget(BaseModel):
    host: str = Field(pattern=r"^[a-z.]+$")
    port: int = Field(ge=1, le=65535)


def deploy(
    version: str, replicas: int, target: DeployTarget, note: str | None = None, tags: list[str] | None = None
) -> str:
    return version


SCHEMA = Tool(deploy).tool_def.parameters_json_schema


@pytest.fixture
def script_page(page):
    """A page that imports the module the way approvals.js does; the scripts are served from static/js."""

    def serve(route) -> None:
        name = route.request.url.removeprefix(f"{ORIGIN}/")
        if name == "index.html":
            route.fulfill(body=PAGE, content_type="text/html")
        else:
            route.fulfill(path=str(SCRIPTS / name), content_type="text/javascript")

    page.route(f"{ORIGIN}/**", serve)
    page.goto(f"{ORIGIN}/index.html")
    expect(page.locator("body")).to_have_attribute("data-ready", "yes")
    return page


def problems(page, value) -> list[str]:
    return page.evaluate(
        "([value, schema]) => { const errors = []; window.validate(value, schema, schema, '', errors);"
        " return errors; }",
        [value, SCHEMA],
    )


GOOD = {"version": "1.2", "replicas": 2, "target": {"host": "a.b", "port": 443}}


def test_valid_arguments_pass(script_page):
    assert problems(script_page, GOOD) == []
    assert problems(script_page, {**GOOD, "note": None, "tags": ["x"]}) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({**GOOD, "replicas": "2"}, "replicas: expected integer, got string"),
        ({**GOOD, "replicas": 1.5}, "replicas: expected integer, got number"),
        ({k: v for k, v in GOOD.items() if k != "version"}, "version: required"),
        ({**GOOD, "extra": 1}, "extra: not an argument of this tool"),
        ({**GOOD, "target": {"host": "A!", "port": 443}}, "target.host: does not match"),
        ({**GOOD, "target": {"host": "a", "port": 70000}}, "target.port: above 65535"),
        ({**GOOD, "tags": [1]}, "tags: does not match any allowed form"),
        ({**GOOD, "note": 5}, "note: does not match any allowed form"),
    ],
)
def test_arguments_breaking_the_schema_are_reported_by_path(script_page, value, expected):
    assert any(problem.startswith(expected) for problem in problems(script_page, value)), problems(script_page, value)
