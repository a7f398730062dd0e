"""Names a package loads on first use (PEP 562), so that importing the package stays cheap."""
import importlib


def lazy_names(package: str, where: dict[str, str]):
    """`__getattr__` and `__dir__` for `package`: `where` maps each name to the submodule that
    defines it; a name is imported on first use, then kept in the package's namespace."""
    module = importlib.import_module(package)

    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{where[name]}", package), name)
        setattr(module, name, value)
        return value

    def __dir__():
        return sorted(set(vars(module)) | set(where))

    return __getattr__, __dir__
