"""Errors that mean "the user's input is wrong", shown as one clear line."""


class UserError(Exception):
    """A mistake in the user's input (a file, a definition, an option).

    The CLI prints the message alone, without a traceback, so the message must
    name what is wrong and where.
    """
