"""An unrendered template (Helm's `{{ .Values.x }}`, Jinja's `{% if %}`): not YAML yet. Apron reads
what the template renders to, never guesses the values."""

from __future__ import annotations

from apron.deploy.candidate import Found
from apron.deploy.formats.base import Document
from apron.errors import BadInput

NAME = "template"
TITLE = "unrendered template"


def claims(document: Document) -> bool:
    return document.is_template


def read(document: Document) -> list[Found]:
    helm = ".Values" in document.text or ".Release" in document.text or ".Chart" in document.text
    kind, how = ("a Helm chart template", "`helm template` it") if helm else ("a Jinja/Go template", "render it")
    raise BadInput(
        f"{document.name}: {kind}, not YAML until it is rendered; {how} and give the output "
        "(or give the chart's values file)"
    )
