"""The component package's plugin folder (see ``__main__.py``); a package only so that
tools name its entry point ``component_package.__main__`` beside the program's ``__main__``."""
