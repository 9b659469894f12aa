"""Bad input to an API function, said in the API's words (:class:`ParameterError`) and a
value still taken but deprecated (:class:`ParameterDeprecation`). They live in
``replicalab.errors``, below every layer, so that the code that finds the bad value (a
workload's config, the fault schedule, the run directory) names the parameter the Python way
and the command line translates it (``cli/errors.py`` ``said``)."""

from replicalab.errors import ParameterDeprecation, ParameterError

__all__ = ["ParameterDeprecation", "ParameterError"]
