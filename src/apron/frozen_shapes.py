"""The `__init__` templates of the package's frozen classes, one function per shape (apron/frozen.py
template_source), written by scripts/frozen_shapes.py: the import system caches their bytecode, where
compiling them at every start took ~3.5 ms of `apron plan`. tests/test_frozen.py checks that these are
exactly the package's shapes and the code template_source compiles to. Not called as written: apron/frozen.py
takes each function's code and gives it a class's field names and defaults.
"""

# ruff: noqa: F821  (_set, _FACTORY, _d0, _f0, ... are the names frozen.py binds for each class)


def s_fffff(self, a0, a1, a2, a3, a4):
    _fields = self.__dict__
    _fields["\0n0"] = _f0() if a0 is _FACTORY else a0
    _fields["\0n1"] = _f1() if a1 is _FACTORY else a1
    _fields["\0n2"] = _f2() if a2 is _FACTORY else a2
    _fields["\0n3"] = _f3() if a3 is _FACTORY else a3
    _fields["\0n4"] = _f4() if a4 is _FACTORY else a4


def s_p(self, a0):
    _fields = self.__dict__
    _fields["\0n0"] = a0


def s_pfpp(self, a0, a1, a2, a3):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = _f1() if a1 is _FACTORY else a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3


def s_pp(self, a0, a1):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1


def s_ppf(self, a0, a1, a2):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = _f2() if a2 is _FACTORY else a2


def s_ppp(self, a0, a1, a2):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2


def s_ppp_post(self, a0, a1, a2):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    self.__post_init__()


def s_pppf(self, a0, a1, a2, a3):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = _f3() if a3 is _FACTORY else a3


def s_pppfp(self, a0, a1, a2, a3, a4):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = _f3() if a3 is _FACTORY else a3
    _fields["\0n4"] = a4


def s_pppp(self, a0, a1, a2, a3):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3


def s_ppppfpppppp(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = _f4() if a4 is _FACTORY else a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10


def s_ppppfppppppppppp(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = _f4() if a4 is _FACTORY else a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = a13
    _fields["\0n14"] = a14
    _fields["\0n15"] = a15


def s_ppppp(self, a0, a1, a2, a3, a4):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4


def s_pppppf(self, a0, a1, a2, a3, a4, a5):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = _f5() if a5 is _FACTORY else a5


def s_pppppp(self, a0, a1, a2, a3, a4, a5):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5


def s_pppppp_post(self, a0, a1, a2, a3, a4, a5):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    self.__post_init__()


def s_ppppppf(self, a0, a1, a2, a3, a4, a5, a6):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = _f6() if a6 is _FACTORY else a6


def s_ppppppp(self, a0, a1, a2, a3, a4, a5, a6):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6


def s_pppppppp(self, a0, a1, a2, a3, a4, a5, a6, a7):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7


def s_ppppppppp(self, a0, a1, a2, a3, a4, a5, a6, a7, a8):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8


def s_pppppppppp(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9


def s_ppppppppppffpppppp(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = _f10() if a10 is _FACTORY else a10
    _fields["\0n11"] = _f11() if a11 is _FACTORY else a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = a13
    _fields["\0n14"] = a14
    _fields["\0n15"] = a15
    _fields["\0n16"] = a16
    _fields["\0n17"] = a17


def s_ppppppppppp(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10


def s_pppppppppppp(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11


def s_ppppppppppppff(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = _f12() if a12 is _FACTORY else a12
    _fields["\0n13"] = _f13() if a13 is _FACTORY else a13


def s_ppppppppppppp(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12


def s_pppppppppppppfpp_post(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = _f13() if a13 is _FACTORY else a13
    _fields["\0n14"] = a14
    _fields["\0n15"] = a15
    self.__post_init__()


def s_pppppppppppppp(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = a13


def s_ppppppppppppppp(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = a13
    _fields["\0n14"] = a14


def s_ppppppppppppppp_post(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = a13
    _fields["\0n14"] = a14
    self.__post_init__()


def s_pppppppppppppppp(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = a13
    _fields["\0n14"] = a14
    _fields["\0n15"] = a15


def s_ppppppppppppppppf(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = a13
    _fields["\0n14"] = a14
    _fields["\0n15"] = a15
    _fields["\0n16"] = _f16() if a16 is _FACTORY else a16


def s_pppppppppppppppppppp(
    self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19
):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = a13
    _fields["\0n14"] = a14
    _fields["\0n15"] = a15
    _fields["\0n16"] = a16
    _fields["\0n17"] = a17
    _fields["\0n18"] = a18
    _fields["\0n19"] = a19


def s_ppppppppppppppppppppp(
    self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20
):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = a13
    _fields["\0n14"] = a14
    _fields["\0n15"] = a15
    _fields["\0n16"] = a16
    _fields["\0n17"] = a17
    _fields["\0n18"] = a18
    _fields["\0n19"] = a19
    _fields["\0n20"] = a20


def s_pppppppppppppppppppppp(
    self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21
):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = a13
    _fields["\0n14"] = a14
    _fields["\0n15"] = a15
    _fields["\0n16"] = a16
    _fields["\0n17"] = a17
    _fields["\0n18"] = a18
    _fields["\0n19"] = a19
    _fields["\0n20"] = a20
    _fields["\0n21"] = a21


def s_ppppppppppppppppppppppppppppffppppppp(
    self,
    a0,
    a1,
    a2,
    a3,
    a4,
    a5,
    a6,
    a7,
    a8,
    a9,
    a10,
    a11,
    a12,
    a13,
    a14,
    a15,
    a16,
    a17,
    a18,
    a19,
    a20,
    a21,
    a22,
    a23,
    a24,
    a25,
    a26,
    a27,
    a28,
    a29,
    a30,
    a31,
    a32,
    a33,
    a34,
    a35,
    a36,
):
    _fields = self.__dict__
    _fields["\0n0"] = a0
    _fields["\0n1"] = a1
    _fields["\0n2"] = a2
    _fields["\0n3"] = a3
    _fields["\0n4"] = a4
    _fields["\0n5"] = a5
    _fields["\0n6"] = a6
    _fields["\0n7"] = a7
    _fields["\0n8"] = a8
    _fields["\0n9"] = a9
    _fields["\0n10"] = a10
    _fields["\0n11"] = a11
    _fields["\0n12"] = a12
    _fields["\0n13"] = a13
    _fields["\0n14"] = a14
    _fields["\0n15"] = a15
    _fields["\0n16"] = a16
    _fields["\0n17"] = a17
    _fields["\0n18"] = a18
    _fields["\0n19"] = a19
    _fields["\0n20"] = a20
    _fields["\0n21"] = a21
    _fields["\0n22"] = a22
    _fields["\0n23"] = a23
    _fields["\0n24"] = a24
    _fields["\0n25"] = a25
    _fields["\0n26"] = a26
    _fields["\0n27"] = a27
    _fields["\0n28"] = _f28() if a28 is _FACTORY else a28
    _fields["\0n29"] = _f29() if a29 is _FACTORY else a29
    _fields["\0n30"] = a30
    _fields["\0n31"] = a31
    _fields["\0n32"] = a32
    _fields["\0n33"] = a33
    _fields["\0n34"] = a34
    _fields["\0n35"] = a35
    _fields["\0n36"] = a36


SHAPES = {
    "fffff": s_fffff,
    "p": s_p,
    "pfpp": s_pfpp,
    "pp": s_pp,
    "ppf": s_ppf,
    "ppp": s_ppp,
    "ppp+": s_ppp_post,
    "pppf": s_pppf,
    "pppfp": s_pppfp,
    "pppp": s_pppp,
    "ppppfpppppp": s_ppppfpppppp,
    "ppppfppppppppppp": s_ppppfppppppppppp,
    "ppppp": s_ppppp,
    "pppppf": s_pppppf,
    "pppppp": s_pppppp,
    "pppppp+": s_pppppp_post,
    "ppppppf": s_ppppppf,
    "ppppppp": s_ppppppp,
    "pppppppp": s_pppppppp,
    "ppppppppp": s_ppppppppp,
    "pppppppppp": s_pppppppppp,
    "ppppppppppffpppppp": s_ppppppppppffpppppp,
    "ppppppppppp": s_ppppppppppp,
    "pppppppppppp": s_pppppppppppp,
    "ppppppppppppff": s_ppppppppppppff,
    "ppppppppppppp": s_ppppppppppppp,
    "pppppppppppppfpp+": s_pppppppppppppfpp_post,
    "pppppppppppppp": s_pppppppppppppp,
    "ppppppppppppppp": s_ppppppppppppppp,
    "ppppppppppppppp+": s_ppppppppppppppp_post,
    "pppppppppppppppp": s_pppppppppppppppp,
    "ppppppppppppppppf": s_ppppppppppppppppf,
    "pppppppppppppppppppp": s_pppppppppppppppppppp,
    "ppppppppppppppppppppp": s_ppppppppppppppppppppp,
    "pppppppppppppppppppppp": s_pppppppppppppppppppppp,
    "ppppppppppppppppppppppppppppffppppppp": s_ppppppppppppppppppppppppppppffppppppp,
}
