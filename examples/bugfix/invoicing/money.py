"""Amounts of money as exact decimals, rounded to cents the way accountants do (half up)."""

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def to_cents(value: Decimal) -> Decimal:
    """Round to whole cents, halves away from zero (2.345 -> 2.35)."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str = "EUR"

    @classmethod
    def of(cls, amount: str | int | Decimal, currency: str = "EUR") -> "Money":
        return cls(to_cents(Decimal(amount)), currency)

    def __add__(self, other: "Money") -> "Money":
        self._same_currency(other)
        return Money(self.amount + other.amount, self.currency)

    def __sub__(self, other: "Money") -> "Money":
        self._same_currency(other)
        return Money(self.amount - other.amount, self.currency)

    def times(self, factor: Decimal | int) -> "Money":
        """This amount multiplied by `factor`, rounded to cents."""
        return Money(to_cents(self.amount * Decimal(factor)), self.currency)

    def _same_currency(self, other: "Money") -> None:
        if other.currency != self.currency:
            raise ValueError(f"cannot combine {self.currency} and {other.currency}")

    def __str__(self) -> str:
        return f"{self.amount:.2f} {self.currency}"


def zero(currency: str = "EUR") -> Money:
    return Money(Decimal("0.00"), currency)
