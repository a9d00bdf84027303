"""``{% capture "name" %}...{% endcapture %}``: renders its contents as usual and, when the
request asks for it (``runs.web.page_cache``), also keeps the rendered text under ``name``.

base.html wraps its blocks in it, so a cached page can be put back together around the
per-request parts (the login state in the top bar, messages, the CSRF token)."""

from __future__ import annotations

from django import template

register = template.Library()

CAPTURE_ATTR = "_page_capture"


class CaptureNode(template.Node):
    def __init__(self, name: str, nodelist: template.NodeList):
        self.name = name
        self.nodelist = nodelist

    def render(self, context: template.Context) -> str:
        output = self.nodelist.render(context)
        store = getattr(context.get("request"), CAPTURE_ATTR, None)
        if store is not None:
            store[self.name] = output
        return output


@register.tag("capture")
def do_capture(parser: template.base.Parser, token: template.base.Token) -> CaptureNode:
    bits = token.split_contents()
    if len(bits) != 2 or bits[1][0] not in "'\"" or bits[1][0] != bits[1][-1]:
        raise template.TemplateSyntaxError('usage: {% capture "name" %}...{% endcapture %}')
    nodelist = parser.parse(("endcapture",))
    parser.delete_first_token()
    return CaptureNode(bits[1][1:-1], nodelist)
