"""The arena's split: one train / validation / test partition per seed, on the arena's own random stream."""

from functools import partial

from uqcal.data import validate
from uqcal.data.splits import TRAIN_VAL_TEST_KEYS, Splitter, train_val_test_split

SPLITTER = Splitter(partial(train_val_test_split, stream="arena"), TRAIN_VAL_TEST_KEYS,
                    validate.train_val_test_split_problems)
