"""What an executed notebook cell printed, as the tests read it."""


def output_parts(cell) -> list[str]:
    """A cell's printed text and its errors (``ename: evalue``), in order; displays and results left out."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}")
    return parts
