"""Planted secrets, one per format the redaction module promises to mask, each unique to this file
so a test can grep any output for it."""

OPENAI = "sk-test-123456"
OPENAI_PROJECT = "sk-proj-Q7hW2mZk9vXb4nR8tY1uE3iO5pA6sD0f"
ANTHROPIC = "sk-ant-api03-Zx8Cv7Bn6Mm5Ll4Kk3Jj2Hh1Gg0FfEeDdCcBbAa"
GITHUB_PAT = "github_pat_11AAAAAAA0xyzXYZ0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
GITHUB_CLASSIC = "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngXyZ12345"
SLACK = "xoxb-2048123456789-4096123456789-QwErTyUiOpAsDfGhJkLzXcVb"
AWS_ACCESS_KEY_ID = "AKIAQ3EGRX7PLANTED01"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTED9KEY"
BASIC_CREDENTIALS = "cGxhbnRlZDp1c2VyLXBhc3N3b3Jk"
BEARER = "eyPlanted.Bearer-Token_0123456789abcdef"
PASSWORD = "Pl4nted-Passw0rd!"
HIGH_ENTROPY = "9fK2xQ7vL1mZ8rT4wB6nH3yC5jD0gS"

IN_TEXT = {
    "openai": f"OPENAI_API_KEY={OPENAI}",
    "openai_project": f"client = OpenAI(api_key='{OPENAI_PROJECT}')",
    "anthropic": f"use {ANTHROPIC} for claude",
    "github_pat": f"git clone https://{GITHUB_PAT}@github.com/o/r",
    "github_classic": f"GH={GITHUB_CLASSIC}",
    "slack": f"post with {SLACK}",
    "aws_key_id": f"aws_access_key_id = {AWS_ACCESS_KEY_ID}",
    "aws_secret": f"aws_secret_access_key = {AWS_SECRET}",
    "basic": f'curl -H "Authorization: Basic {BASIC_CREDENTIALS}" https://example.test',
    "bearer": f"Authorization: Bearer {BEARER}",
    "password": f"db password={PASSWORD}",
    "high_entropy": f"the deploy secret is {HIGH_ENTROPY} (do not share)",
}
"""Each secret as it tends to appear: in a command line, a config file, a header."""

ALL = [v for k, v in globals().items() if k.isupper() and isinstance(v, str) and k != "IN_TEXT"]
