"""Source text shared by the tests' small engine trees."""

# The write-loc class in upstream's spelling: a `physical` mark, and the batch factory reading the batch's mark.
PHYSICAL_WRITE_LOC = '''from dataclasses import dataclass


@dataclass
class KVWriteLoc:
    loc: object
    physical: bool = False

    @classmethod
    def for_batch(cls, forward_batch):
        return cls(forward_batch.out_cache_loc, physical=forward_batch.out_cache_loc_is_physical)
'''
