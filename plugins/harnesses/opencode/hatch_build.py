"""Ship the opencode plugin's bundle inside this package.

Its one source is `opencode-plugin/semantic-memory.js` at the repository root, outside this
project, so a static force-include would name a path that an sdist cannot hold: a wheel built
from the sdist (`uv build`, pip from an index) failed. So an sdist built from the repository
carries a copy in the package folder, and a wheel takes that copy when it is there (built from
the sdist), else the repository's bundle (built from a checkout). An editable install takes
neither: `plugin_path()` finds the bundle in the checkout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SHIPPED = "semantic_memory_opencode/semantic-memory.js"


class BundleHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable" or (Path(self.root) / SHIPPED).is_file():
            return  # the checkout's bundle at run time, or the sdist's copy (in the package)
        checkout = Path(self.root).parents[2] / "opencode-plugin" / "semantic-memory.js"
        if not checkout.is_file():
            raise FileNotFoundError(f"the opencode plugin bundle is missing ({checkout}): "
                                    "run `npm ci && npm run build` in opencode-plugin/")
        build_data["force_include"][str(checkout)] = SHIPPED
