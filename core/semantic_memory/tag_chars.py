"""What reads as "<" in front of a tag name: "<" itself and its look-alikes (fullwidth, small
form, angle quotation marks and brackets, the curved angle bracket `⧼`, the precedes sign
`≺`). The service's wrapper escapes these before its own tag names
(default_plugins/injection.py) and the hooks before their harness's wrapper tags
(harness/adapter.py). Standard library only: a hook imports it."""

LESS_THAN = "<\uff1c\ufe64\u2039\u2329\u3008\u27e8\u276c\u276e\u02c2\u1438\u29fc\u227a"
