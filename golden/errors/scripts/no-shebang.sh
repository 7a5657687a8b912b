echo missing its #! line
