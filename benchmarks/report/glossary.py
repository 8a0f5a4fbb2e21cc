"""The report's words: what each metric and column means, and its title."""

from __future__ import annotations

METRICS = [
    ("consistency", "share of items whose answer one move of the final adversary changed, with a valid "
                    "scene, averaged over the evaluation samples (how often the player is inconsistent)."),
    ("drop", "share of items answered right before the move and wrong after it (the accuracy the "
             "player loses to one move)."),
    ("adversary", "trained (state A2C): the adversary trained by RL on the mini-game, seeing the scene graph; "
                  "trained-pixel (pixel A2C): the same, seeing the original image; random: uniform random bins "
                  "for every object, with the same number of samples on the same items (most of its moves are "
                  "invalid); random-valid: a random move of one or two objects, drawn again until every referee "
                  "accepts it (up to 64 draws), same samples and items; search: greedy search over "
                  "single-object moves within a query budget (first seed of each mini-game only)."),
    ("mean, 95% CI", "mean over mini-games and seeds with a bootstrap 95% confidence interval; max: the "
                     "highest mini-game mean (over its seeds); p: one-sample t-test against 0 "
                     "(no manipulation succeeds)."),
    ("drop p vs random", "paired t-test of the trained adversary's drop against the random adversary's "
                         "on the same trials."),
    ("clean acc.", "the player's accuracy on the unmoved scenes of the mini-games."),
    ("player errors", "queries the player failed to answer (crash, time-out, garbage), over all queries of "
                      "the trials; an item with a failed answer in the evaluation is unscored (left out of "
                      "consistency and drop, never counted as unchanged; the count follows), and a trial with "
                      "more than 5% failed queries, overall or in an evaluation (or its --max-error-rate), is "
                      "failed."),
    ("tests", "the unit of each test is a mini-game, its seeds averaged (they play the same items), or a "
              "distinct item. 1: Wilcoxon signed-rank test of the drop, state- against pixel-input adversary, "
              "paired per player, size and mini-game (exact without tied differences, else the exact permutation "
              "test over every sign flip); 2: Jonckheere-Terpstra trend test of the drop across sizes, by "
              "permutation over every assignment of the mini-game means to the sizes (100,000 seeded random "
              "ones above 10^6); 3: Spearman rank correlation across players of clean accuracy with mean drop "
              "and mean consistency (exact permutation p up to 8 players); 4: Kruskal-Wallis test of the dropped "
              "share across question families and kinds, per player and trained adversary, one value per "
              "distinct item (its mean over the trials); 5: Wilcoxon signed-rank test, over mini-games, of the "
              "mean displacement of successful manipulations against valid moves that changed nothing. All "
              "two-sided; n/a when there is nothing to test (the note says why)."),
    ("Holm-adjusted p", "the p-value adjusted by Holm's step-down method over every test the five questions "
                        "make; \"significant\" means a Holm-adjusted p below 0.05. The p-values of the Results "
                        "table (t-tests) are raw."),
    ("family, kind", "family: the question's template file (zero_hop, one_hop, ..., compare_integer); "
                     "kind: what it asks (count, exist, compare, query an attribute). Per family, "
                     "consistency and drop are means over the item results of the trained adversary "
                     "(each item once per trial that played it)."),
]

TITLE = "clevr-game robustness benchmark"

