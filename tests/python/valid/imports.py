import a.b.c
import a.b as c, d
from . import (a, b)
from .a import *
from .... import x
