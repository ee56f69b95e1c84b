# Makes `plugin` importable from tests/.
