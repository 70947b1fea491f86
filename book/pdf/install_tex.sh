#!/usr/bin/env bash
# TeX tools for `make pdf` (Jupyter Book's LaTeX builder, run with xelatex and the ctex package):
# Debian's packages, installed only when a tool is missing. Needs root or sudo; about 700 MB.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
if command -v xelatex >/dev/null 2>&1 && command -v latexmk >/dev/null 2>&1 \
   && command -v xindy >/dev/null 2>&1 && command -v pdftotext >/dev/null 2>&1 && command -v rsvg-convert >/dev/null 2>&1 \
   && kpsewhich ctex.sty >/dev/null 2>&1 && kpsewhich fncychap.sty >/dev/null 2>&1; then
  exit 0
fi
$SUDO apt-get update
# texlive-lang-chinese: ctex and the Fandol fonts it defaults to; texlive-latex-extra: the packages Sphinx's
# LaTeX writer loads (fncychap, tabulary, capt-of, needspace, ...); xindy for its index; librsvg2-bin and a CJK
# font turn the SVG diagrams into PNG (book/pdf/svg2png); poppler-utils reads the PDF back in its test.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends \
  latexmk texlive-xetex texlive-lang-chinese texlive-latex-recommended texlive-latex-extra \
  texlive-fonts-recommended texlive-plain-generic lmodern fonts-freefont-otf fonts-dejavu-core xindy \
  poppler-utils librsvg2-bin fonts-wqy-microhei
