"""Published figures of the seed papers, each with its source (paper, table, row).

Only numbers that appear in the papers' text are stored.  Hu & Kwok 2015's Tables III-VII
and Kulis et al. 2006's Fig. 1 are images in our copies of the papers: their values are not
available, and the printouts say so instead of inventing them.
"""

from __future__ import annotations

#: Hu & Kwok (IJCAI 2013), Table 2: KL_ADMM clustering accuracy (%, mean, std)
#: and CPU time (s, mean, std), 20 runs, on an Intel machine in MATLAB.
HUKWOK2013_TABLE2 = {
    # data set: (acc mean, acc std, time mean, time std, SimpleNPKL acc, SimpleNPKL time)
    "chessboard": (91.28, 4.17, 3.08, 0.05, 89.09, 17.06),
    "double_spiral": (99.70, 0.96, 0.74, 0.23, 98.71, 10.44),
    "glass": (83.56, 2.02, 17.56, 0.18, 84.24, 71.38),
    "heart": (78.88, 2.79, 37.14, 0.16, 78.03, 113.85),
    "iris": (98.69, 1.08, 3.44, 0.19, 97.55, 35.26),
    "sonar": (91.54, 2.49, 16.28, 0.21, 89.53, 62.35),
    "soybean": (98.73, 3.84, 0.77, 0.18, 96.10, 1.96),
    "wine": (84.11, 2.29, 6.89, 0.20, 83.79, 45.58),
    "a1a": (95.85, 1.35, 54.99, 0.78, 85.68, 365.68),
    "a2a": (95.65, 0.58, 92.02, 1.64, 85.70, 988.12),
    "a3a": (93.16, 0.93, 161.60, 3.25, 83.68, 2800.0),
    "a4a": (93.23, 0.46, 319.29, 2.71, 82.97, 8767.8),
}
HUKWOK2013_SOURCE = "Hu & Kwok 2013, Table 2, column KL_ADMM"

#: Wu et al. (NIPS 2009), Tables 1 (Swiss roll, RegMVU) and 2 (USPS, RegPCP):
#: m -> (SCSDP time, SCSDP iters, SQLP time, SQLP iters, rank(A)); None = not run (> 1 day)
WU2009_TABLE1 = {
    10: (3.84, 29, 0.96, 32, 64), 15: (60.36, 30, 1.75, 31, 153),
    20: (557.79, 32, 4.48, 35, 264), 25: (2821.76, 34, 7.84, 37, 403),
    30: (13039.30, 37, 13.39, 35, 537), 35: (38559.50, 33, 29.74, 35, 670),
    40: (None, None, 74.01, 35, 852), 50: (None, None, 213.26, 35, 1152),
    60: (None, None, 467.90, 35, 1451), 80: (None, None, 1729.65, 39, 2062),
    100: (None, None, 3988.31, 36, 2623),
}
WU2009_TABLE2 = {
    10: (2.84, 21, 0.47, 16, 100), 15: (42.96, 22, 1.26, 17, 225),
    20: (461.38, 27, 3.35, 17, 400), 25: (2572.72, 31, 5.97, 14, 625),
    30: (10576.01, 30, 15.72, 19, 900), 35: (35173.60, 30, 44.53, 17, 1225),
    40: (None, None, 133.58, 20, 1600), 50: (None, None, 362.24, 16, 2379),
    60: (None, None, 936.58, 19, 2938), 80: (None, None, 1784.12, 17, 3112),
    100: (None, None, 2900.44, 17, 3111),
}
WU2009_SOURCE = "Wu et al. 2009, Table 1 (Swiss roll, RegMVU) and Table 2 (USPS, RegPCP)"

HUKWOK2015_NOTE = ("Hu & Kwok 2015 Tables III-VII are images in our copy of the paper; "
                   "their values are not available, so only our figures are printed. The text "
                   "states: all solvers have comparable accuracy for hinge / squared hinge / "
                   "square loss, BCDKL is consistently fastest, and its time scales linearly "
                   "or sublinearly with n (Table VII).")
KULIS2006_NOTE = ("Kulis et al. 2006 Fig. 1 is an image; the text states that adding "
                  "a few constraints improves NMI significantly and that Burg and von Neumann "
                  "perform comparably. Paper setting: 317 digits of classes 3, 8, 9, rank-16 "
                  "linear kernel, epsilon = 0.25, tolerance 1e-3.")
