"""Inline code in the prose that names a public function or class of course_lib links to its API entry.

The pages write the library as ``cl.name`` (``import course_lib as cl``): `cl.rollout_cost`,
`cl.rollout_cost(..., gradient="adjoint")`. Each such inline literal becomes a cross-reference to
``course_lib.name`` on the API page (book/api.md), so a reader reaches the docstring from the sentence
that uses the function. Code cells are left alone. A name the API page does not document would be a
broken link, and Sphinx reports it (warnings are errors in the book build).
"""

from __future__ import annotations

import functools
import inspect
import re

from docutils import nodes
from sphinx import addnodes

API_NAME = re.compile(r"cl\.([A-Za-z_]\w*)")


def documented_names() -> set[str]:
    """The public functions and classes of course_lib: what the API page renders with autodoc."""
    import course_lib

    return {
        name
        for name in dir(course_lib)
        if not name.startswith("_")
        and (inspect.isfunction(getattr(course_lib, name)) or inspect.isclass(getattr(course_lib, name)))
    }


def _link_api_names(app, doctree, names: frozenset[str]):
    for literal in list(doctree.findall(nodes.literal)):
        if literal.parent is None or isinstance(literal.parent, (nodes.reference, addnodes.pending_xref, nodes.title)):
            continue
        match = API_NAME.match(literal.astext())
        if match is None or match.group(1) not in names:
            continue
        xref = addnodes.pending_xref(
            "",
            refdomain="py",
            reftype="obj",
            reftarget=f"course_lib.{match.group(1)}",
            refexplicit=True,
            refwarn=True,
            refdoc=app.env.docname,
        )
        literal.replace_self(xref)
        xref += literal


def setup(app):
    # read here, in the main process, before Sphinx forks its parallel readers: in a profile of a fresh build
    # (py-spy, every process), the readers' own imports of course_lib (JAX) were a tenth of the build's samples
    names = frozenset(documented_names())
    app.connect("doctree-read", functools.partial(_link_api_names, names=names))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
