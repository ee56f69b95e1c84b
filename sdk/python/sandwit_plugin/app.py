"""The component's entry point, which componentize-py builds: the exports of
`sandwit:plugin/sandbox-method@0.2.0` for the plugin of the project's
`plugin.py` (its module-level `NekroPlugin`). Imported only in a build."""

import plugin as _project

from . import _component
from ._plugin import NekroPlugin

_found = [v for v in vars(_project).values() if isinstance(v, NekroPlugin)]
if len(_found) != 1:
    raise RuntimeError(f"plugin.py must define one NekroPlugin at module level, not {len(_found)}")

Plugin, Lifecycle = _component.export_classes(_found[0])
